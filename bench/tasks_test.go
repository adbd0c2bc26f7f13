package bench

import (
	"strings"
	"testing"
	"time"
)

func TestTasksConfigErrors(t *testing.T) {
	t.Parallel()
	valid := func() TasksConfig {
		return TasksConfig{
			Weir:  Weir{Exe: "/bin/weir", ServeArgs: []string{"serve"}, CreateKey: noKey},
			Tasks: 10, Capacity: 5, Job: time.Second, PollMin: time.Millisecond, PollMax: time.Second, Connections: 2,
		}
	}
	if err := valid().validate(true); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		drain  bool
		change func(*TasksConfig)
		want   string
	}{
		{true, func(c *TasksConfig) { c.Weir.ServeArgs = nil }, "Weir.ServeArgs"},
		{false, func(c *TasksConfig) { c.Weir.CreateKey = nil }, "Weir.CreateKey"},
		{true, func(c *TasksConfig) { c.Tasks = 0 }, "--tasks"},
		{false, func(c *TasksConfig) { c.Connections = 0 }, "--connections"},
		{true, func(c *TasksConfig) { c.PollMax = c.PollMin / 2 }, "--poll-max"},
		{true, func(c *TasksConfig) { c.Capacity = 0 }, "--capacity"},
		{true, func(c *TasksConfig) { c.Job = 0 }, "--job"},
		{true, func(c *TasksConfig) { c.Fleet = FleetConfig{Replicas: 2} }, "--dsn"},
		{false, func(c *TasksConfig) { c.Fleet = FleetConfig{Replicas: 2} }, "--dsn"},
		{true, func(c *TasksConfig) { c.Fleet = FleetConfig{Replicas: 2, DSN: "postgres://x"}; c.Capacity = 5 }, "multiple of --fleet"},
		{false, func(c *TasksConfig) { c.Fill = "ftp" }, "--fill"},
		{true, func(c *TasksConfig) { c.Fill = "store" }, "--fill store"},
		{false, func(c *TasksConfig) { c.Fill = "store"; c.Fleet = FleetConfig{Replicas: 2, DSN: "postgres://x"} }, "--fill store"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.validate(tc.drain); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
	// Restart sets its own capacity and job, on a fleet too (the
	// capacity need not split among the replicas).
	c := valid()
	c.Capacity, c.Job = 0, 0
	c.Fleet = FleetConfig{Replicas: 3, DSN: "postgres://x"}
	if err := c.validate(false); err != nil {
		t.Errorf("restart without capacity and job: %v", err)
	}
}
