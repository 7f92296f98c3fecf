// The "auth" route filter: a required credential, and optionally a role.

package auth

import "github.com/loopgate/loopgate/filters"

// The WWW-Authenticate challenges of RFC 6750 3.
const (
	challengeMissing = `Bearer realm="loopgate"`
	challengeInvalid = `Bearer error="invalid_token"`
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
// 403/40301. On a warm cache it does not allocate.
func NewFilter(v *Verifier, order int, roles []string) filters.Filter {
	return &authFilter{
		Base:  filters.Base{FilterName: "auth", FilterOrder: order},
		v:     v,
		roles: append([]string(nil), roles...),
	}
}

func (f *authFilter) Request(x *filters.Exchange) filters.Verdict {
	cred := x.Req.Headers.Get(f.v.header)
	if len(cred) == 0 {
		return reject(x, FailMissing, challengeMissing)
	}
	id, fail := f.v.Verify(x, cred)
	if fail != nil {
		challenge := challengeInvalid
		if fail == FailMissing {
			challenge = challengeMissing
		}
		return reject(x, fail, challenge)
	}
	x.Identity = id
	if len(f.roles) > 0 && !hasAnyRole(&x.Identity, f.roles) {
		return reject(x, FailForbidden, "")
	}
	return filters.Continue
}

// reject answers with fail and, when challenge is set, a WWW-Authenticate
// header.
func reject(x *filters.Exchange, fail *Failure, challenge string) filters.Verdict {
	v := x.Reject(fail.Status, fail.Code, fail.Message)
	if challenge != "" {
		x.Rejection.HeaderName, x.Rejection.HeaderValue = "WWW-Authenticate", challenge
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
