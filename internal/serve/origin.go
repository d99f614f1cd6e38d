package serve

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// OriginPolicy is which web pages may use an HTTP address: its own (a page it served) and the
// listed origins (--cors-origins), no other. A browser sends cookies of no kind here, but it
// carries requests from any page it shows to any address it reaches, so without this a page on the
// internet could read or write through an operator's browser:
//   - CORS: only a listed origin gets Access-Control-Allow-Origin, so no other page reads an answer.
//   - Cross-site writes: a request that changes state (any method but GET, HEAD and OPTIONS) or opens
//     a WebSocket (etcd's gateway watches through one; browsers apply no CORS to WebSockets) is
//     refused with 403 when Sec-Fetch-Site says another site sent it, or when its Origin is neither
//     the address's own (scheme, host and port of the request's Host) nor listed. Requests without
//     either header (curl, dmctl, Go clients) pass.
//   - Content type: such a request with a body must say Content-Type: application/json (else 415);
//     text/plain and the form types are what a page may send without asking CORS first.
type OriginPolicy struct {
	origins map[string]bool
	tls     bool // the address serves https: its own origin is https://Host
	log     *zap.Logger
}

// ParseOrigins reads a comma-separated list of origins (http://host[:port] or https://, as a
// browser sends it in Origin); empty is none. "*" is refused: it would hand every page the cluster.
func ParseOrigins(flag, s string) ([]string, error) {
	var out []string
	for o := range strings.SplitSeq(s, ",") {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if o == "*" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("--%s %q: give origins as scheme://host[:port], like http://dash.example:8080 (and no \"*\")", flag, o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

// NewOriginPolicy allows origins (from ParseOrigins) besides the address's own; tls says the address
// serves https. Refusals are logged on log.
func NewOriginPolicy(origins []string, tls bool, log *zap.Logger) *OriginPolicy {
	p := &OriginPolicy{origins: map[string]bool{}, tls: tls, log: log}
	for _, o := range origins {
		p.origins[o] = true
	}
	return p
}

// Origins are the listed origins, sorted.
func (p *OriginPolicy) Origins() []string {
	out := make([]string, 0, len(p.origins))
	for o := range p.origins {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// Handler applies the policy in front of h.
func (p *OriginPolicy) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		listed := origin != "" && p.origins[strings.ToLower(origin)]
		if listed {
			// Set, not Add: in front of etcd's handlers, etcd has added the same for a listed origin.
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
			w.Header().Set("Access-Control-Allow-Headers", "accept, content-type, authorization")
		}
		w.Header().Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.WriteHeader(http.StatusOK) // a preflight: the headers above are the answer
			return
		}
		upgrade := r.Header.Get("Upgrade") != ""
		if !upgrade && (r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions) {
			h.ServeHTTP(w, r)
			return
		}
		if !listed {
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				p.refuse(w, r, http.StatusForbidden, "cross-site request refused: Sec-Fetch-Site is "+site+
					"; only this address's own pages and the origins of --cors-origins may change state")
				return
			}
			if origin != "" && !strings.EqualFold(origin, p.own(r)) {
				p.refuse(w, r, http.StatusForbidden, "cross-site request refused: Origin "+origin+" is not "+p.own(r)+
					" nor one of --cors-origins")
				return
			}
		}
		if !upgrade && (r.ContentLength != 0 || r.Header.Get("Content-Type") != "") {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				p.refuse(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q refused: a %s with a body must be application/json",
					r.Header.Get("Content-Type"), r.Method))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// own is the origin of the address as the request names it.
func (p *OriginPolicy) own(r *http.Request) string {
	if p.tls || r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// refuse answers as the HTTP API's errors are: {"error_msg": ..., "error_code": ...}.
func (p *OriginPolicy) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p.log.Warn("HTTP request refused", zap.Int("status", status), zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.String("origin", r.Header.Get("Origin")), zap.String("sec-fetch-site", r.Header.Get("Sec-Fetch-Site")),
		zap.String("content-type", r.Header.Get("Content-Type")), zap.String("remote", r.RemoteAddr), zap.String("reason", msg))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error_msg": msg, "error_code": status})
}
