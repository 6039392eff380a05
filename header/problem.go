package header

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem type URIs requested by draft-11 §5 (digest §1.7, H5). They are
// provisional until IANA registers them, so servers should keep the URI
// configurable and use these as defaults.
const (
	ProblemQuotaExceeded            = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	ProblemTemporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	ProblemAbnormalUsageDetected    = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
)

// ProblemContentType is the RFC 9457 JSON media type.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object with the draft-11
// violated-policies extension (digest §1.7, §3.3). Encode it with
// encoding/json; absent members are omitted.
type Problem struct {
	// Type is a URI reference; empty means "about:blank".
	Type string `json:"type,omitempty"`
	// Title summarises the type (e.g. "Quota Exceeded"), not the occurrence.
	Title string `json:"title,omitempty"`
	// Status must equal the response status code (429 for H1).
	Status int `json:"status,omitempty"`
	// Detail explains this occurrence for humans; clients must not parse it.
	Detail string `json:"detail,omitempty"`
	// Instance is a URI reference identifying this occurrence.
	Instance string `json:"instance,omitempty"`
	// ViolatedPolicies names the exceeded policies (draft-11 §5).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter repeats Retry-After in seconds for clients that read only
	// the body; it is a Floodgate extension member, not part of the draft.
	RetryAfter int64 `json:"retry_after,omitempty"`
}

// QuotaExceeded returns the problem for a 429 caused by the named
// policies (H1, H5), with the registry title and status.
func QuotaExceeded(detail string, retryAfterSeconds int64, violated ...string) Problem {
	return Problem{
		Type:             ProblemQuotaExceeded,
		Title:            "Quota Exceeded",
		Status:           429,
		Detail:           detail,
		ViolatedPolicies: violated,
		RetryAfter:       retryAfterSeconds,
	}
}

// Write sends p as the whole response, with status p.Status: the body in
// RFC 9457 JSON, its length, and Cache-Control: no-store, since an error
// about this moment must not be served again from a cache (for a 429, RFC
// 6585 §4). It replaces any Content-Length set before, e.g. an upstream's.
func (p Problem) Write(w http.ResponseWriter) {
	body, _ := json.Marshal(p) // strings, ints and a []string: cannot fail
	h := w.Header()
	h["Content-Type"] = []string{ProblemContentType}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(p.Status)
	w.Write(body)
}
