module github.com/floodgate/floodgate/examples/chi

go 1.26.0

// The library's modules from this checkout (this module is not released).
replace github.com/floodgate/floodgate => ../..

require (
	github.com/floodgate/floodgate v0.0.0
	github.com/go-chi/chi/v5 v5.5.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/realclientip/realclientip-go v1.0.0 // indirect
)
