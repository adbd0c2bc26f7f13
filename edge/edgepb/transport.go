package edgepb

// The flow-control windows of a node's connection, which each end sets
// for what it receives. Fixed windows turn off gRPC's bandwidth
// estimation, which otherwise keeps a ping and its answer going for as
// long as data flows: on a link of many small chunks, about one round
// trip for every few chunks, each a write and a wake-up at both ends. A
// stream's window bounds what one run can have in flight unread (a slow
// client's stream buffers no more at the gateway); at 4 MiB a body still
// crosses a 100 ms path at 40 MiB/s.
const (
	StreamWindow = 4 << 20
	ConnWindow   = 16 << 20
)
