// Auth: the admin port's bearer tokens and their roles.

package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"path"
	"slices"
	"strings"
)

// Token is one bearer token the admin port accepts (config admin.tokens).
type Token struct {
	Name   string
	Secret string
	Write  bool // role write: every method; otherwise GET and HEAD only
}

type tokenKey struct{}

// tokenName is the name of the token r was authenticated with, "" when the
// port has no tokens.
func tokenName(r *http.Request) string {
	name, _ := r.Context().Value(tokenKey{}).(string)
	return name
}

// authenticate refuses, with tokens configured, a request without a valid
// bearer token (401, code 40101 when there is none, 40102 when it matches
// no token) and a state change with a read token (403, code 40301). GET
// and HEAD of Options.OpenReads and of the dashboard's files pass without
// one. With no tokens every
// request passes: Listen allows that on loopback only.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if len(s.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if read && (slices.Contains(s.openReads, r.URL.Path) || uiPath(r.URL.Path)) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loopgate-admin"`)
			s.fail(w, http.StatusUnauthorized, 40101, "this needs an admin token: Authorization: Bearer <token> (admin.tokens)")
			return
		}
		t := s.match(strings.TrimSpace(secret))
		switch {
		case t == nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="loopgate-admin", error="invalid_token"`)
			s.fail(w, http.StatusUnauthorized, 40102, "the admin token matches none in admin.tokens")
		case !read && !t.Write:
			s.fail(w, http.StatusForbidden, 40301, "token "+t.Name+" has the read role; this needs a write token")
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t.Name)))
		}
	})
}

// uiPath reports whether p is the dashboard's page or one of its files
// (ui.go). They hold nothing secret and are served without a token, so
// that the page can ask for one; everything they poll needs it. p is
// cleaned first: "/ui/../config" is not the dashboard's.
func uiPath(p string) bool {
	c := path.Clean(p)
	return c == "/ui" || strings.HasPrefix(c, "/ui/")
}

// match returns the token whose secret is secret, or nil. It compares the
// SHA-256 of every token with the candidate's in constant time, and looks
// at all of them whatever matched, so neither the timing nor the length of
// a secret leaks.
func (s *Server) match(secret string) *Token {
	sum := sha256.Sum256([]byte(secret))
	var found *Token
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokenSums[i][:]) == 1 {
			found = &s.tokens[i]
		}
	}
	return found
}
