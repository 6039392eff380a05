package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/ops/reduce"
)

// AdminClient calls the admin routes of a running daemon, as the
// `floodgate reduce` command does.
type AdminClient struct {
	// BaseURL is the admin listener, e.g. "http://127.0.0.1:9090".
	BaseURL string
	// Token is sent as a Bearer token when set.
	Token string
	// HTTP sends the requests; default http.DefaultClient.
	HTTP *http.Client
}

// Reduce starts a reduction (POST /v1/admin/reduce). Errors carry the
// server's problem detail, e.g. an unknown policy.
func (c *AdminClient) Reduce(ctx context.Context, req ReduceRequest) ([]reduce.Reduction, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out ReduceResponse
	err = c.do(ctx, http.MethodPost, "/v1/admin/reduce", body, &out)
	return out.Reductions, err
}

// EndReduce ends the reductions of policies now; none means all
// (DELETE /v1/admin/reduce). It returns those still in force.
func (c *AdminClient) EndReduce(ctx context.Context, policies []string) ([]reduce.Reduction, error) {
	q := url.Values{"policy": policies}
	path := "/v1/admin/reduce"
	if len(policies) > 0 {
		path += "?" + q.Encode()
	}
	var out ReduceResponse
	err := c.do(ctx, http.MethodDelete, path, nil, &out)
	return out.Reductions, err
}

// Reductions lists the reductions in force (GET /v1/admin/reductions).
func (c *AdminClient) Reductions(ctx context.Context) ([]reduce.Reduction, error) {
	var out ReduceResponse
	err := c.do(ctx, http.MethodGet, "/v1/admin/reductions", nil, &out)
	return out.Reductions, err
}

// Top returns up to n heaviest limited keys of rule ("" for every rule)
// (GET /v1/admin/top).
func (c *AdminClient) Top(ctx context.Context, rule string, n int) (TopResponse, error) {
	q := url.Values{}
	if rule != "" {
		q.Set("rule", rule)
	}
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	var out TopResponse
	err := c.do(ctx, http.MethodGet, "/v1/admin/top?"+q.Encode(), nil, &out)
	return out, err
}

func (c *AdminClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var p header.Problem
		if json.Unmarshal(data, &p) == nil && p.Detail != "" {
			return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, p.Detail)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(data, out)
}
