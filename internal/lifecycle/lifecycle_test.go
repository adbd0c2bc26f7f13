package lifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// recorder is a service that writes what happens to it into a log.
func recorder(log *[]string, name string, startErr, stopErr error) Service {
	return Funcs{
		OnStart: func(context.Context) error {
			*log = append(*log, "start "+name)
			return startErr
		},
		OnStop: func(context.Context) error {
			*log = append(*log, "stop "+name)
			return stopErr
		},
	}
}

func TestListOrder(t *testing.T) {
	var log []string
	var l List
	l.Add("a", recorder(&log, "a", nil, nil))
	l.Add("none", nil)
	l.Add("b", recorder(&log, "b", nil, errors.New("flush failed")))
	l.Add("c", recorder(&log, "c", nil, nil))
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := l.Stop(t.Context())
	if err == nil || err.Error() != "stop b: flush failed" {
		t.Fatalf("Stop = %v; want b's error, named", err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %v; want %v", log, want)
	}
	if err := l.Stop(t.Context()); err != nil || len(log) != len(want) {
		t.Fatalf("second Stop = %v, log %v; want nothing done", err, log)
	}
	if err := l.Start(t.Context()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

// TestListStartFails: a failed start stops nothing by itself; Stop then
// stops exactly those that started, the failed one not among them.
func TestListStartFails(t *testing.T) {
	var log []string
	var l List
	l.Add("a", recorder(&log, "a", nil, nil))
	l.Add("b", recorder(&log, "b", errors.New("port in use"), nil))
	l.Add("c", recorder(&log, "c", nil, nil))
	err := l.Start(t.Context())
	if err == nil || err.Error() != "start b: port in use" {
		t.Fatalf("Start = %v; want b's error, named", err)
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %v; want %v", log, want)
	}
}

func TestLoop(t *testing.T) {
	var l Loop
	if err := l.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Go = %v", err)
	}
	ran := make(chan struct{})
	l.Go(func(ctx context.Context) error {
		close(ran)
		<-ctx.Done()
		return ctx.Err()
	})
	<-ran
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if l.Err() != nil {
		t.Fatalf("Err = %v after Stop; want nil: stopped is not failed", l.Err())
	}

	var f Loop
	fenced := errors.New("fenced")
	f.Go(func(context.Context) error { return fenced })
	<-f.Done()
	if !errors.Is(f.Err(), fenced) {
		t.Fatalf("Err = %v; want what the function returned", f.Err())
	}
	if err := f.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestLoopStopBounded: Stop gives up when its ctx ends before the
// function returns.
func TestLoopStopBounded(t *testing.T) {
	var l Loop
	release := make(chan struct{})
	defer close(release)
	l.Go(func(context.Context) error {
		<-release
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v; want the context's error", err)
	}
}
