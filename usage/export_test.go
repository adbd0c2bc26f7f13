package usage

// SetMaxPending lowers r's bound on buffered records, for a test that
// fills the buffer.
func SetMaxPending(r *Recorder, n int) { r.maxPending = n }

// SetRecoverLimit lowers how many reservations one recovery transaction
// counts, for a test that sees a round take several.
func SetRecoverLimit(r *Recorder, n int) { r.recoverLimit = n }
