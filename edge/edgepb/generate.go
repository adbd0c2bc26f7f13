// Package edgepb is the protocol between a gateway and its edge nodes,
// generated from edge.proto (which documents it). After changing
// edge.proto, regenerate with `go generate ./edge/edgepb`: it needs protoc
// (Debian's protobuf-compiler) and builds the two pinned plugins itself.
package edgepb

//go:generate sh generate.sh
