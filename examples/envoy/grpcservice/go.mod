module github.com/floodgate/floodgate/examples/envoy/grpcservice

go 1.26.0

// The library's modules from this checkout (this module is not released).
replace (
	github.com/floodgate/floodgate => ../../..
	github.com/floodgate/floodgate/grpclimit => ../../../grpclimit
)

require github.com/floodgate/floodgate v0.0.0

require (
	github.com/floodgate/floodgate/grpclimit v0.0.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/realclientip/realclientip-go v1.0.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
