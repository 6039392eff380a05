module github.com/floodgate/floodgate/grpclimit

go 1.26.0

// The library's modules from this checkout. A release requires their tags
// instead (scripts/release.sh), since `go install …@version` refuses a
// module with replace directives and a module's users ignore them.
replace github.com/floodgate/floodgate => ..

require (
	github.com/floodgate/floodgate v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/realclientip/realclientip-go v1.0.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
