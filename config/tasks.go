package config

// validate reports what the tasks section sets wrong: a negative
// backlog bound.
func (t Tasks) validate() error {
	if t.QueueLimit < 0 {
		return invalidf("tasks.queue_limit", "must not be negative (0: the default, 10000)")
	}
	return nil
}
