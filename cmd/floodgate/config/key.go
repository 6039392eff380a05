package config

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/floodgate/floodgate/header"
)

// KeyKind is what one part of a key template reads.
type KeyKind uint8

const (
	KeyIP      KeyKind = iota + 1 // {ip}: the client address behind trusted proxies
	KeyRoute                      // {route}: the matched rule's pattern
	KeyMethod                     // {method}: the request method
	KeyHost                       // {host}: the request host, without port
	KeyHeader                     // {header:Name}: a header's value as sent
	KeyAPIKey                     // {api_key} or {api_key:Header}: a SHA-256 fingerprint of an API key
	KeyUser                       // {user}: Identity.UserHeader, from a trusted proxy only
	KeyTenant                     // {tenant}: Identity.TenantHeader, from a trusted proxy only
	KeyLiteral                    // fixed text
)

// KeyPart is one "|"-separated part of a key template.
type KeyPart struct {
	Kind KeyKind
	// Arg is the header name of KeyHeader and KeyAPIKey ("" for the
	// configured API key header) or the text of KeyLiteral.
	Arg string
}

// ParseKey parses a key template such as "{ip}|{route}" or
// "{tenant}|{header:X-Region}". Parts are separated by "|"; each is one
// placeholder or literal text without braces.
func ParseKey(tmpl string) ([]KeyPart, error) {
	if tmpl == "" {
		return nil, fmt.Errorf("empty key template")
	}
	var parts []KeyPart
	for _, seg := range strings.Split(tmpl, "|") {
		if seg == "" {
			return nil, fmt.Errorf("key template %q has an empty part", tmpl)
		}
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("key part %q: a placeholder must be a whole part between '|'s", seg)
			}
			parts = append(parts, KeyPart{Kind: KeyLiteral, Arg: seg})
			continue
		}
		name, arg, hasArg := strings.Cut(seg[1:len(seg)-1], ":")
		p := KeyPart{Arg: arg}
		switch name {
		case "ip":
			p.Kind = KeyIP
		case "route":
			p.Kind = KeyRoute
		case "method":
			p.Kind = KeyMethod
		case "host":
			p.Kind = KeyHost
		case "user":
			p.Kind = KeyUser
		case "tenant":
			p.Kind = KeyTenant
		case "header":
			p.Kind = KeyHeader
			if !header.IsToken(arg) {
				return nil, fmt.Errorf("key part %q: want {header:Header-Name}", seg)
			}
		case "api_key":
			p.Kind = KeyAPIKey
			if hasArg && !header.IsToken(arg) {
				return nil, fmt.Errorf("key part %q: want {api_key} or {api_key:Header-Name}", seg)
			}
		default:
			return nil, fmt.Errorf("unknown key part %q (want {ip}, {route}, {method}, {host}, {header:Name}, {api_key}, {user} or {tenant})", seg)
		}
		if hasArg && p.Kind != KeyHeader && p.Kind != KeyAPIKey {
			return nil, fmt.Errorf("key part %q takes no argument", seg)
		}
		if hasArg {
			p.Arg = http.CanonicalHeaderKey(arg)
		}
		parts = append(parts, p)
	}
	return parts, nil
}
