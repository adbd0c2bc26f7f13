package edgepb

// The flow-control windows of a node's connection, which each end sets
// for what it receives. Fixed windows turn off gRPC's bandwidth
// estimation, which otherwise keeps a ping and its answer going for as
// long as data flows: on a link of many small chunks, about one round
// trip for every few chunks, each a write and a wake-up at both ends.
//
// A stream's window is what one run may have in flight unread. The
// gateway's, for answers, bounds what a run whose client reads slowly
// buffers there (an answer is read at the client's pace), and still
// lets an answer cross a 100 ms path at 10 MiB/s. The node's, for request
// bodies, which it reads as they come, is larger, for uploads of audio
// and images from afar.
const (
	AnswerWindow = 1 << 20
	BodyWindow   = 4 << 20
	ConnWindow   = 16 << 20
)
