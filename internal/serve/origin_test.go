package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestParseOrigins(t *testing.T) {
	got, err := ParseOrigins("cors-origins", " http://Dash.example:8080/, https://ops.example ,")
	if err != nil || strings.Join(got, ",") != "http://dash.example:8080,https://ops.example" {
		t.Fatalf("ParseOrigins: %v %v", got, err)
	}
	if got, err := ParseOrigins("cors-origins", ""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"*", "dash.example", "ftp://dash.example", "http://dash.example/app", "http://u@dash.example", "http://"} {
		if _, err := ParseOrigins("cors-origins", bad); err == nil || !strings.Contains(err.Error(), "--cors-origins") {
			t.Errorf("ParseOrigins(%q): %v, want an error naming the flag", bad, err)
		}
	}
}

// The policy in front of a handler, as on the address that is not etcd's (--etcd-endpoints), where it
// answers preflights itself; tls: the own origin is https.
func TestOriginPolicy(t *testing.T) {
	const own, dash, evil = "https://m1:8261", "http://dash.example", "http://evil.example"
	p := NewOriginPolicy([]string{dash}, true, zap.NewNop())
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }))
	for _, c := range []struct {
		name, method, ctype, body string
		chunked                   bool
		hdr                       []string
		status                    int
		allow                     string
	}{
		{"GET from another site is served, unreadable", "GET", "", "", false, []string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}, 200, ""},
		{"GET from a listed origin", "GET", "", "", false, []string{"Origin", dash}, 200, dash},
		{"preflight from another site", "OPTIONS", "", "", false, []string{"Origin", evil, "Access-Control-Request-Method", "POST"}, 200, ""},
		{"preflight from a listed origin", "OPTIONS", "", "", false, []string{"Origin", dash, "Access-Control-Request-Method", "POST"}, 200, dash},
		{"curl: JSON", "POST", "application/json; charset=utf-8", "{}", false, nil, 200, ""},
		{"curl: no body, no type", "POST", "", "", false, nil, 200, ""},
		{"curl: text/plain", "POST", "text/plain", "{}", false, nil, 415, ""},
		{"curl: a body of unknown length and no type", "POST", "", "{}", true, nil, 415, ""},
		{"curl: DELETE with a form", "DELETE", "application/x-www-form-urlencoded", "a=b", false, nil, 415, ""},
		{"own page over https", "POST", "application/json", "{}", false, []string{"Origin", own, "Sec-Fetch-Site", "same-origin"}, 200, ""},
		{"own host over http is another origin", "POST", "application/json", "{}", false, []string{"Origin", "http://m1:8261"}, 403, ""},
		{"another site, text/plain", "POST", "text/plain", "{}", false, []string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}, 403, ""},
		{"another site says same-origin", "POST", "application/json", "{}", false, []string{"Origin", evil, "Sec-Fetch-Site", "same-origin"}, 403, ""},
		{"Sec-Fetch-Site alone", "PUT", "application/json", "{}", false, []string{"Sec-Fetch-Site", "same-site"}, 403, ""},
		{"a listed origin, JSON", "POST", "application/json", "{}", false, []string{"Origin", dash, "Sec-Fetch-Site", "cross-site"}, 200, dash},
		{"a listed origin, text/plain", "POST", "text/plain", "{}", false, []string{"Origin", dash, "Sec-Fetch-Site", "cross-site"}, 415, dash},
		{"WebSocket from another site", "GET", "", "", false, []string{"Upgrade", "websocket", "Origin", evil}, 403, ""},
		{"WebSocket from the own page", "GET", "", "", false, []string{"Upgrade", "websocket", "Origin", own}, 200, ""},
	} {
		r := httptest.NewRequest(c.method, "/v3/kv/range", strings.NewReader(c.body))
		r.Host = "m1:8261"
		if c.chunked {
			r.ContentLength = -1
		}
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		for i := 0; i+1 < len(c.hdr); i += 2 {
			r.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("Access-Control-Allow-Origin") != c.allow {
			t.Errorf("%s: %d, Access-Control-Allow-Origin %q, want %d and %q\n%s", c.name, w.Code, w.Header().Get("Access-Control-Allow-Origin"), c.status, c.allow, w.Body)
		}
		if w.Code >= 400 && !strings.Contains(w.Body.String(), `"error_msg"`) {
			t.Errorf("%s: refusal without a JSON error: %s", c.name, w.Body)
		}
	}
}
