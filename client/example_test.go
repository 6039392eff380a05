package client_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/client"
)

// The draft's warning case: r/t suggests 1000 requests per second, the
// policy 10. The client follows the policy, and its own cap below that.
func ExampleExtract() {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"hour";q=10000;w=1000`)
	h.Set("RateLimit", `"hour";r=10000;t=10`)
	s := client.Extract(h, 200, time.Now(), client.ExtractOptions{})
	for _, it := range s.Items {
		pace, _ := it.Pace(client.DefaultMaxWindow)
		fmt.Printf("%s: q=%d w=%d r=%d t=%d -> %.0f requests/s\n", it.Policy, it.Quota, it.Window, it.Remaining, it.EffectiveWindow, pace)
	}
	// Output: hour: q=10000 w=1000 r=10000 t=10 -> 10 requests/s
}

func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"minute";q=60;w=60`)
		w.Header().Set("RateLimit", `"minute";r=30;t=60`)
	}))
	defer srv.Close()

	auditLogger := slog.New(slog.DiscardHandler)
	url := srv.URL + "/items"

	c, err := client.New(
		client.WithRate(20, 5),             // at most 20 requests/s, bursts of 5, whatever the server says
		client.WithConcurrency(4),          // at most 4 in flight
		client.WithMaxWait(30*time.Second), // no single sleep longer than this
		client.WithMaxAttempts(3),          // first attempt + 2 retries
		client.WithAttemptHeader("Floodgate-Attempt"),
		client.WithLogger(auditLogger), // one record per observation
	)
	if err != nil {
		fmt.Println(err) // an option out of range, named with its value
		return
	}
	resp, err := c.Get(url) // e.g. "https://api.example.com/items"
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	st, _ := c.Transport.(*client.Transport).State(srv.URL)
	fmt.Println(resp.StatusCode, "next request in", st.Interval)
	// Output: 200 next request in 2s
}

// An option out of its range is refused, not clamped or ignored: the error
// names the option and the value.
func ExampleNew_invalidOption() {
	_, err := client.New(client.WithRate(20, 5), client.WithJitter(50))
	fmt.Println(errors.Is(err, floodgate.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// floodgate: invalid option: client: WithJitter: fraction must be in [0, 1], got 50
}
