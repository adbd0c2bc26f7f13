package weir

// NodeView is one edge node as the admin API (/admin/nodes) and the
// console show it: the edge hub that holds its session makes it, and in a
// fleet the replicas pass theirs to each other as JSON (the board of
// nodes).
type NodeView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Connected: the node has a live session, of Generation, whose
	// providers are configured and take requests.
	Connected  bool   `json:"connected"`
	Generation uint64 `json:"generation"`
	// Draining: the node is shutting down; it is offered nothing more
	// and its session ends once its runs have.
	Draining bool `json:"draining,omitempty"`
	// LastSeenMs is how long ago the node last registered or heartbeat,
	// by the gateway's clock.
	LastSeenMs int64 `json:"last_seen_ms"`
	// ReadyStreams is how many Run streams the node keeps open ahead and
	// waiting for a run: a request offered on one crosses the network
	// once each way; with none waiting, its offer goes on the Control
	// stream and the node opens a Run stream for it.
	ReadyStreams int            `json:"ready_streams"`
	Providers    []ProviderView `json:"providers"`
	// Replica is, in a fleet, the replica the node dialed when it is not
	// this one; its view is that replica's, as it last published it
	// (AgeMs ago).
	Replica string `json:"replica,omitempty"`
	AgeMs   int64  `json:"age_ms,omitempty"`
}

// ProviderView is one provider of a node, with its slots as the engine
// holds them.
type ProviderView struct {
	ID        string   `json:"id"`
	Adapter   string   `json:"adapter"`
	Target    string   `json:"target"`
	Models    []string `json:"models"`
	Slots     int64    `json:"slots"`
	Used      int64    `json:"used"`
	Queued    int      `json:"queued"`
	LongSlots int64    `json:"long_slots,omitempty"`
	LongUsed  int64    `json:"long_used,omitempty"`
	// Orphaned: the node's session ended; the slots admit nothing until
	// it is back.
	Orphaned bool `json:"orphaned"`
	// Paused: the slots admit nothing for now (the provider is
	// unavailable, or the node drains); what they hold runs on.
	Paused bool `json:"paused,omitempty"`
	// Health is "available", or "unavailable" once evidence said so (no
	// request is sent to it until a probe finds it available again).
	Health string `json:"health"`
}

// ForgottenNode is a gone edge node an operator forgot (POST
// /admin/nodes/{node}/forget): its id and name as it last registered,
// and the scopes of its slots that were retired.
type ForgottenNode struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}
