package server

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestDashboardLoginBrowser: with admin.token set, Debian's Chromium asked
// for the dashboard gets the 401's challenges, raises its login prompt
// (the DevTools protocol's authRequired, answered here with the token as
// the password, as a user types it), and then shows the dashboard with its
// data; a wrong password is asked again, never let in.
func TestDashboardLoginBrowser(t *testing.T) {
	chrome := testkit.Env(t, "FLOODGATE_TEST_CHROMIUM")
	if _, err := os.Stat(chrome); err != nil {
		t.Fatalf("FLOODGATE_TEST_CHROMIUM=%s: %v; scripts/services-up.sh installs Chromium", chrome, err)
	}
	f := start(t, baseConfig)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()

	var mu sync.Mutex
	var prompts []string // each prompt's scheme and the password given
	passwords := []string{"wrong", "admin-secret"}
	events := make(chan any, 256)
	// The first action starts the browser; it must not carry the timeout.
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev.(type) {
		case *fetch.EventAuthRequired, *fetch.EventRequestPaused:
			events <- ev
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	go func() {
		for ev := range events {
			switch e := ev.(type) {
			case *fetch.EventAuthRequired:
				mu.Lock()
				pw := passwords[min(len(prompts), len(passwords)-1)]
				prompts = append(prompts, e.AuthChallenge.Scheme+":"+pw)
				mu.Unlock()
				chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: e.RequestID, AuthChallengeResponse: &fetch.AuthChallengeResponse{
					Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: "admin", Password: pw,
				}})
			case *fetch.EventRequestPaused:
				chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			}
		}
	}()
	handle := true
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 40*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(f.url(FaceAdmin, "/dashboard/?refresh=300"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`Number(document.body.dataset.updates || 0) >= 1`, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 300)`))
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the dashboard never showed its data (login prompts %v; page %q): %v", prompts, body, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(prompts) != 2 || prompts[0] != "basic:wrong" || prompts[1] != "basic:admin-secret" {
		t.Errorf("login prompts %v, want one refused wrong password, then the token", prompts)
	}
}
