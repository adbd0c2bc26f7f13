package usage

// SetMaxPending lowers r's bound on buffered records, for a test that
// fills the buffer.
func SetMaxPending(r *Recorder, n int) { r.maxPending = n }
