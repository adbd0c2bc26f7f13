// Package e2e holds Weir's end-to-end tests. They run the real weir
// binary, built once by TestMain: each test starts its own `weir serve`
// on a free port with a temporary SQLite database, in front of its own mock
// providers (provider/mock served in the test process on real listeners),
// creates keys with `weir keys`, and checks what a client, the mock and the
// admin API see. The package has no code outside its tests.
package e2e
