// Package bench measures what Capstan's controllers cost the API server:
// requests per Machine by verb and resource (from the API server's own
// metrics), conflicts, and reconciles per Machine, from create to Running,
// against real API servers with the contract-following test provider.
//
//	make build && CAPSTAN_BIN=$PWD/bin/capstan go test ./test/bench -run '^$' -bench . -benchtime 1x
package bench
