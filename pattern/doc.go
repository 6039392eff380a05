// Package pattern parses the route patterns of Floodgate's rules and
// skips, "[METHOD ][HOST]/[PATH]" in http.ServeMux syntax, matches a
// request's method, host and path against them, and finds the rules an
// earlier pattern shadows; it imports no HTTP package, so the daemon's
// configuration checks what the middleware enforces.
//
// A pattern has an optional method (GET also matches HEAD), an optional
// host, and a path whose segments are literals, {name} wildcards (one
// segment), a final {name...} (the rest) or a final {$} (the path ends
// there); a path ending in "/" matches everything below it. Literals are
// percent-decoded as ServeMux decodes them ("/my%20file").
//
// So that a limit is not dodged by respelling a path, matching is looser
// than ServeMux's: the path is cleaned ("//login", "/a/../login"),
// literals and methods compare without regard to case, ";parameters" are
// dropped from segments, and an exact pattern such as "/login" also
// matches "/login/".
package pattern
