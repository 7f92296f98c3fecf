// Runtime: IP bans and credential revocations, which take effect at once
// and are no config version.

package admin

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
)

// Runtime is the running gateway's ban list and revocations
// (engine.Server's Bans and Verifier). Safe for concurrent use.
type Runtime interface {
	Bans() *access.Bans
	Revoke(credential string, until time.Time)
	RevokeKey(apiKey string)
	Unrevoke(credential string)
	// RevokeUser and UnrevokeUser refuse, and admit again, every
	// credential of a subject; UserRevocationKey is the key the cluster
	// shares for it.
	RevokeUser(subject string, until time.Time)
	UnrevokeUser(subject string)
	UserRevocationKey(subject string) [16]byte
	Revocations() int
	// RevocationKey is the key Revoke (RevokeKey when apiKey) keeps
	// credential under, and a JWT's exp (see auth.Verifier.RevocationKey):
	// what the cluster shares instead of the credential.
	RevocationKey(credential string, apiKey bool) (key [16]byte, exp time.Time)
	// RevocationSet is the revocations themselves (auth.Revocations),
	// which the cluster and the runtime state file read and replace.
	RevocationSet() RevocationSet
}

// sharedRevocations is the cluster revocations go through, or nil when
// they stay on this node.
func (s *Server) sharedRevocations() *Cluster {
	if s.control != nil && s.control.cluster.SharesRevocations() {
		return s.control.cluster
	}
	return nil
}

// sharedBans is the cluster bans go through, or nil when they stay on
// this node.
func (s *Server) sharedBans() *Cluster {
	if s.control != nil && s.control.cluster.SharesBans() {
		return s.control.cluster
	}
	return nil
}

// sharedWriteFailed answers a cluster revocation or ban write that failed.
func (s *Server) sharedWriteFailed(w http.ResponseWriter, err error) {
	if errFull(err) {
		s.fail(w, http.StatusConflict, 40901, err.Error())
		return
	}
	s.fail(w, http.StatusServiceUnavailable, 50301, err.Error())
}

func (s *Server) runtimeAPI(m *http.ServeMux) {
	if s.runtime == nil {
		return
	}
	m.HandleFunc("GET /bans", s.listBans)
	m.HandleFunc("POST /bans", s.postBan)
	m.HandleFunc("DELETE /bans/{prefix...}", s.deleteBan)
	m.HandleFunc("GET /revocations", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"revocations": s.runtime.Revocations()})
	})
	m.HandleFunc("POST /revocations", s.postRevocation)
	m.HandleFunc("DELETE /revocations", s.deleteRevocation)
}

type banJSON struct {
	Prefix string `json:"prefix"`
	Until  string `json:"until"`
}

func (s *Server) listBans(w http.ResponseWriter, _ *http.Request) {
	list := s.runtime.Bans().List(time.Now())
	out := make([]banJSON, len(list))
	for i, b := range list {
		out[i] = banJSON{b.Prefix.String(), b.Until.UTC().Format(time.RFC3339)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"bans": out})
}

// parsePrefix reads an address or a CIDR.
func parsePrefix(v string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(v); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.ParsePrefix(v)
}

func (s *Server) postBan(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prefix string `json:"prefix"`
		TTL    string `json:"ttl"` // a Go duration: "10m", "1h30m"
	}
	if !s.decode(w, r, &body) {
		return
	}
	ttl, err := time.ParseDuration(body.TTL)
	if err != nil || ttl <= 0 {
		s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf(`ttl %q: want a positive duration such as "10m"`, body.TTL))
		return
	}
	p, perr := parsePrefix(body.Prefix)
	if perr != nil {
		s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("prefix %q: want an IP address or a CIDR", body.Prefix))
		return
	}
	p = filters.NormalizePrefix(p) // as the ban list keeps it, and names it
	if k := s.sharedBans(); k != nil {
		if err := k.add(k.bans, p.String(), time.Now().Add(ttl)); err != nil {
			s.sharedWriteFailed(w, err)
			return
		}
	} else if err := s.runtime.Bans().Ban(p, ttl); err != nil {
		s.fail(w, http.StatusConflict, 40901, err.Error())
		return
	} else if !s.persistRuntime(w) {
		return
	}
	s.runtimeAudit(r, "ban "+p.String()+" for "+ttl.String())
	writeJSON(w, http.StatusOK, map[string]any{"banned": p.String(), "until": time.Now().Add(ttl).UTC().Format(time.RFC3339)})
}

func (s *Server) deleteBan(w http.ResponseWriter, r *http.Request) {
	p, err := parsePrefix(r.PathValue("prefix"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("prefix %q: want an IP address or a CIDR", r.PathValue("prefix")))
		return
	}
	var banned bool
	if k := s.sharedBans(); k != nil {
		if banned, err = k.remove(k.bans, filters.NormalizePrefix(p).String()); err != nil {
			s.sharedWriteFailed(w, err)
			return
		}
	} else {
		banned = s.runtime.Bans().Unban(p)
	}
	if !banned {
		s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("%s is not banned", p))
		return
	}
	if s.sharedBans() == nil && !s.persistRuntime(w) {
		return
	}
	s.runtimeAudit(r, "unban "+p.String())
	writeJSON(w, http.StatusOK, map[string]any{"unbanned": p.String()})
}

// revocation is a POST or DELETE /revocations body: a credential (a JWT or
// an API key), an api_key or a user (a subject: every credential of it),
// and for a POST an optional until.
type revocation struct {
	Credential string `json:"credential"`
	APIKey     string `json:"api_key"`
	User       string `json:"user"`
	Until      string `json:"until"` // RFC 3339; default: for good
}

// named reports whether exactly one of credential, api_key and user is set.
func (b *revocation) named() bool {
	n := 0
	for _, v := range []string{b.Credential, b.APIKey, b.User} {
		if v != "" {
			n++
		}
	}
	return n == 1
}

func (s *Server) postRevocation(w http.ResponseWriter, r *http.Request) {
	var body revocation
	if !s.decode(w, r, &body) {
		return
	}
	var until time.Time
	if body.Until != "" {
		var err error
		if until, err = time.Parse(time.RFC3339, body.Until); err != nil {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("until %q: want an RFC 3339 time", body.Until))
			return
		}
	}
	switch k := s.sharedRevocations(); {
	case !body.named():
		s.fail(w, http.StatusBadRequest, 40001, "credential, api_key or user: set exactly one")
		return
	case k != nil && body.User != "":
		key := s.runtime.UserRevocationKey(body.User)
		if err := k.add(k.revocations, hex.EncodeToString(key[:]), until); err != nil {
			s.sharedWriteFailed(w, err)
			return
		}
	case body.User != "":
		s.runtime.RevokeUser(body.User, until)
	case k != nil:
		key, exp := s.runtime.RevocationKey(body.Credential+body.APIKey, body.APIKey != "")
		if !exp.IsZero() && (until.IsZero() || exp.Before(until)) {
			until = exp // Redis need not keep it past the token's own end
		}
		if err := k.add(k.revocations, hex.EncodeToString(key[:]), until); err != nil {
			s.sharedWriteFailed(w, err)
			return
		}
	case body.APIKey != "":
		s.runtime.RevokeKey(body.APIKey)
	default:
		s.runtime.Revoke(body.Credential, until)
	}
	if s.sharedRevocations() == nil && !s.persistRuntime(w) {
		return
	}
	s.runtimeAudit(r, "revoke a credential") // never the credential itself
	writeJSON(w, http.StatusOK, map[string]any{"revoked": true, "revocations": s.runtime.Revocations()})
}

func (s *Server) deleteRevocation(w http.ResponseWriter, r *http.Request) {
	var body revocation
	if !s.decode(w, r, &body) {
		return
	}
	if !body.named() {
		s.fail(w, http.StatusBadRequest, 40001, "credential, api_key or user: set exactly one")
		return
	}
	cred := body.Credential + body.APIKey
	k := s.sharedRevocations()
	switch {
	case k != nil:
		key, _ := s.runtime.RevocationKey(cred, false) // an API key is named as Unrevoke names it
		if body.User != "" {
			key = s.runtime.UserRevocationKey(body.User)
		}
		if _, err := k.remove(k.revocations, hex.EncodeToString(key[:])); err != nil {
			s.sharedWriteFailed(w, err)
			return
		}
	case body.User != "":
		s.runtime.UnrevokeUser(body.User)
	default:
		s.runtime.Unrevoke(cred)
	}
	if k == nil && !s.persistRuntime(w) {
		return
	}
	s.runtimeAudit(r, "lift a revocation")
	writeJSON(w, http.StatusOK, map[string]any{"revocations": s.runtime.Revocations()})
}

// persistRuntime writes the runtime state file after a write that stays on
// this node, when there is one. When it cannot be written it answers 500
// (code 50001) and reports false: the write took effect here, but a
// restart would lose it.
func (s *Server) persistRuntime(w http.ResponseWriter) bool {
	if s.persist == nil {
		return true
	}
	if err := s.persist.save(); err != nil {
		s.fail(w, http.StatusInternalServerError, 50001, "applied on this node, but a restart would lose it: "+err.Error())
		return false
	}
	return true
}

// runtimeAudit logs a runtime write; it changes no version.
func (s *Server) runtimeAudit(r *http.Request, action string) {
	if s.audit != nil {
		s.audit(AuditEntry{Token: tokenName(r), Action: r.Method + " " + r.URL.Path + ": " + action})
	}
}
