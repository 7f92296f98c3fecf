// The "auth" route filter: a required credential, optionally a role, and
// the verified identity passed to the upstream in request headers.

package auth

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// The WWW-Authenticate challenges of RFC 6750 3. Read-only.
var (
	challengeMissing = []byte(`Bearer realm="loopgate"`)
	challengeInvalid = []byte(`Bearer error="invalid_token"`)
)

// authFilter requires a valid credential and, when roles is set, one of
// those roles. It is immutable and safe for concurrent use.
type authFilter struct {
	filters.Base
	v     *Verifier
	roles []string // any one of them admits; empty = any identity
}

var _ filters.Filter = (*authFilter)(nil)

// NewFilter is a route's "auth" filter: it reads the credential from the
// configured header, verifies it with v and sets x.Identity. A missing
// credential is 401/40101, a bad one 401/40102 (with a WWW-Authenticate
// challenge), and an identity with none of roles (when roles is not empty)
// 403/40301. A request carrying the credential header more than once is
// 400/40001: which field counts would be a guess, and a proxy in front of
// Loopgate may pick another one than we do.
//
// An admitted request gets the identity headers (auth.identity_headers) set
// on its upstream request, replacing any the client sent: the subject, the
// tenant, the roles joined with "," and the credential kind ("jwt" or
// "api_key"). A header whose value is empty is removed instead. On a warm
// cache it does not allocate: the edits are built once per verified
// credential and queued whole (HeaderEdits.AddSets).
func NewFilter(v *Verifier, order int, roles []string) filters.Filter {
	return &authFilter{
		Base:  filters.Base{FilterName: Name, FilterOrder: order},
		v:     v,
		roles: append([]string(nil), roles...),
	}
}

func (f *authFilter) Request(x *filters.Exchange) filters.Verdict {
	cred, n := onlyField(x.Req.Headers, f.v.header)
	switch {
	case n > 1:
		return reject(x, f.v.duplicate, nil)
	case len(cred) == 0:
		return reject(x, FailMissing, challengeMissing)
	}
	vd, fail := f.v.check(x, cred)
	if fail != nil {
		challenge := challengeInvalid
		if fail == FailMissing {
			challenge = challengeMissing
		}
		return reject(x, fail, challenge)
	}
	x.Identity = vd.id
	if len(f.roles) > 0 && !hasAnyRole(&x.Identity, f.roles) {
		return reject(x, FailForbidden, nil)
	}
	if !x.ReqEdits.AddSets(&vd.edits) {
		return x.Reject(500, 50001, "auth: too many header edits")
	}
	return filters.Continue
}

// onlyField returns the value of the first field called name and how many
// fields are called so, counting at most two.
func onlyField(hs codec.Headers, name string) (value []byte, n int) {
	for i := range hs {
		if codec.EqualFold(hs[i].Name, name) {
			if n++; n == 1 {
				value = hs[i].Value
			} else {
				return value, n
			}
		}
	}
	return value, n
}

// reject answers with fail and, when challenge is set, a WWW-Authenticate
// header.
func reject(x *filters.Exchange, fail *Failure, challenge []byte) filters.Verdict {
	v := x.Reject(fail.Status, fail.Code, fail.Message)
	if challenge != nil {
		x.Rejection.AddHeader("WWW-Authenticate", challenge)
	}
	return v
}

func hasAnyRole(id *filters.Identity, roles []string) bool {
	for _, r := range roles {
		if id.HasRole(r) {
			return true
		}
	}
	return false
}
