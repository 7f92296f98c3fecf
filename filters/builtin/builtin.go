// Package builtin registers every filter that ships with Loopgate.
// engine/config imports it, so every config knows these filters' names
// and keys. A new filter is one package that calls filters.Register from
// its init function, plus one line here.
package builtin

import (
	_ "github.com/loopgate/loopgate/filters/access"            // ip_access, limits
	_ "github.com/loopgate/loopgate/filters/auth"              // auth, external_auth
	_ "github.com/loopgate/loopgate/filters/ratelimit/limiter" // rate_limit
	_ "github.com/loopgate/loopgate/filters/respbody"          // response_body
	_ "github.com/loopgate/loopgate/filters/transform"         // request_id, headers, rewrite, gray, hash, forwarded
)
