module github.com/floodgate/floodgate/tier

go 1.26.0

// The library's modules from this checkout. A release requires their tags
// instead (scripts/release.sh), since `go install …@version` refuses a
// module with replace directives and a module's users ignore them.
replace github.com/floodgate/floodgate => ..

require (
	github.com/floodgate/floodgate v0.0.0
	github.com/jackc/pgx/v5 v5.12.0
	golang.org/x/sync v0.25.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/realclientip/realclientip-go v1.0.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
