package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/tier"
)

// APIKeyHeader carries an API key itself to GET and DELETE /v1/limits,
// which hash it as the {api_key} key part does: a key kept out of the
// URL stays out of access logs.
const APIKeyHeader = "Floodgate-Api-Key"

// PartitionKey turns the identity an operator has into the partition key
// that rule counts under, checking it against the rule's key template
// (rules[].key). key holds the template's parts in order, "|"-separated:
//
//   - {ip}: an IPv4 or IPv6 address in any form (or the masked prefix
//     client_ip.ipv6_prefix makes of it), written as the daemon keys it;
//   - {route}: the rule's match pattern, exactly;
//   - {method}, {host}: any case;
//   - {api_key}: the hashed form, the first 16 hex digits of the key's
//     SHA-256 (the full 64 digits are cut to 16), or "-" with the key
//     itself in apiKey (the Floodgate-Api-Key header);
//   - {header:Name}, {user}, {tenant}: the value as sent;
//   - literal text: itself.
//
// A key that does not fit is an error naming the template, never a quiet
// look at a counter nobody uses. A rule that is not configured, or a skip
// rule, is an error too.
func PartitionKey(cfg *config.Config, rule, key, apiKey string) (string, error) {
	i := slices.IndexFunc(cfg.Rules, func(r config.Rule) bool { return r.Name == rule && !r.Skip })
	if i < 0 {
		return "", fmt.Errorf("no limiting rule %q", rule)
	}
	r := cfg.Rules[i]
	tmpl := r.Key
	if tmpl == "" {
		tmpl = "{ip}"
	}
	parts, err := config.ParseKey(tmpl)
	if err != nil {
		return "", err
	}
	vals := strings.Split(key, "|")
	if len(vals) != len(parts) {
		return "", fmt.Errorf("rule %q counts under %q: give %d \"|\"-separated parts, got %d", rule, tmpl, len(parts), len(vals))
	}
	for j, p := range parts {
		v, err := keyValue(cfg, r.Match, p, vals[j], apiKey)
		if err != nil {
			return "", fmt.Errorf("rule %q counts under %q: part %d: %w", rule, tmpl, j+1, err)
		}
		vals[j] = v
	}
	return strings.Join(vals, "|"), nil
}

// keyValue is one part of a partition key, as the middleware writes it
// (httplimit's KeyParts, the resolver's client address key).
func keyValue(cfg *config.Config, route string, p config.KeyPart, v, apiKey string) (string, error) {
	switch p.Kind {
	case config.KeyIP:
		return ipKey(v, cfg.ClientIP.IPv6Prefix)
	case config.KeyRoute:
		if v != route {
			return "", fmt.Errorf("{route} is the rule's pattern %q, got %q", route, v)
		}
	case config.KeyMethod:
		v = strings.ToUpper(v)
	case config.KeyHost:
		v = strings.ToLower(v)
	case config.KeyAPIKey:
		return apiKeyID(v, apiKey)
	case config.KeyLiteral:
		if v != p.Arg {
			return "", fmt.Errorf("the literal part is %q, got %q", p.Arg, v)
		}
	}
	if v == "" {
		return "", errors.New("empty: a request without this part counts under \"-\"")
	}
	return v, nil
}

func ipKey(v string, v6bits int) (string, error) {
	if pr, err := netip.ParsePrefix(v); err == nil && v6bits > 0 && pr.Addr().Is6() && pr.Bits() == v6bits {
		return pr.Masked().String(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(v, "[]"))
	if err != nil {
		return "", fmt.Errorf("{ip} is a client address such as 203.0.113.5 or 2001:db8::1, got %q", v)
	}
	a = a.WithZone("").Unmap()
	if v6bits > 0 && a.Is6() {
		pr, _ := a.Prefix(v6bits) // bits were validated at load
		return pr.String(), nil
	}
	return a.String(), nil
}

func apiKeyID(v, apiKey string) (string, error) {
	switch {
	case v == "-" && apiKey != "":
		return tier.HashKey(apiKey).ID(), nil
	case apiKey != "":
		return "", fmt.Errorf("with the %s header, write the {api_key} part as \"-\"", APIKeyHeader)
	case isHex(v) && (len(v) == 16 || len(v) == 64):
		return strings.ToLower(v[:16]), nil
	}
	return "", fmt.Errorf("{api_key} is the hashed form, the first 16 hex digits of the key's SHA-256 (floodgate fingerprint --api-key prints it), or \"-\" with the key itself in the %s header", APIKeyHeader)
}

func isHex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// limitTarget is what a GET or DELETE /v1/limits/{key} looks at: the
// limiters its query selects (selectFromQuery, whose strictness comes
// first) and the partition key (limitKey).
func (s *Server) limitTarget(st *state, r *http.Request) (string, *engine.Compiled, *checkError) {
	rule, cerr := s.selectFromQuery(st, r)
	if cerr != nil {
		return "", nil, cerr
	}
	key, cerr := limitKey(st, r)
	return key, rule, cerr
}

// limitKey is the partition key of a GET or DELETE /v1/limits/{key}:
// under ?rule= the identity PartitionKey reads, unless ?form=partition
// asks for the key exactly as counted (the keys /v1/check callers chose);
// without a rule, the key as given.
func limitKey(st *state, r *http.Request) (string, *checkError) {
	key := r.PathValue("key")
	q := r.URL.Query()
	switch form := q.Get("form"); {
	case form != "" && form != "identity" && form != "partition":
		return "", badRequest("form is identity (default: the rule's key template, checked) or partition (the key exactly as counted), got %q", form)
	case q.Get("rule") != "" && form != "partition":
		k, err := PartitionKey(st.cfg, q.Get("rule"), key, r.Header.Get(APIKeyHeader))
		if err != nil {
			return "", badRequest("%v; or give the key exactly as counted with form=partition", err)
		}
		key = k
	}
	if cerr := checkKey(key, st.cfg.API.MaxKeyLength); cerr != nil {
		return "", cerr
	}
	return key, nil
}
