package metrics

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// BenchmarkObserveRequest is what one non-streamed model request
// observes: its HTTP answer, its queue wait, its upstream call and the
// call's GenAI metrics.
func BenchmarkObserveRequest(b *testing.B) {
	m := New(nil)
	call := gateway.GenAICall{
		GenAIOp:  gateway.GenAIOp{Operation: "chat", Provider: "openai", RequestModel: "gpt-4o-mini", ResponseModel: "gpt-4o-mini-2024-07-18"},
		Duration: 900 * time.Microsecond, Tokens: true, Input: 12, Output: 80,
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveQueueWait("gpt-4o-mini", 12*time.Microsecond)
			m.ObserveUpstream("mock/gpt-4o-mini", "ok", 800*time.Microsecond)
			m.ObserveGenAI(call)
			m.ObserveHTTP("chat", 200, time.Millisecond)
		}
	})
}

// BenchmarkSpent is the cost of one request counted in weir_spend_total,
// as weir serve counts every request served by a platform model.
func BenchmarkSpent(b *testing.B) {
	m := New(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Spent("key_d108e6f885b5", "default", "gpt-4o-mini", "mock/gpt-4o-mini", 1500)
		}
	})
}

// BenchmarkAffinity is the cost of one request counted in
// weir_affinity_total, as a request of a model with cache affinity is.
func BenchmarkAffinity(b *testing.B) {
	m := New(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Affinity("gpt-4o-mini", "hit")
		}
	})
}

// BenchmarkTask is what one durable task observes as it drains: its
// transitions to admitted, running and succeeded, its wait and its run.
func BenchmarkTask(b *testing.B) {
	m := New(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.TaskTransition(weir.TaskAdmitted)
			m.TaskTransition(weir.TaskRunning)
			m.TaskWaited("sora-2", 40*time.Millisecond)
			m.TaskTransition(weir.TaskSucceeded)
			m.TaskRan("sora-2", weir.TaskSucceeded, 2*time.Second)
		}
	})
}
