package admission

// PositionByScan is the oracle for Position: it compares the waiter with
// every waiter parked on its scope (see positionByScan).
func PositionByScan(m *Memory, waiterID string) (Position, error) {
	return m.positionByScan(waiterID)
}
