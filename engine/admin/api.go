// The config API: resources under /config, the versions, rollback.

package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

// maxBody bounds a write's JSON body.
const maxBody = 4 << 20

// configAPI registers the config endpoints when the port has a Control.
func (s *Server) configAPI(m *http.ServeMux) {
	if s.control == nil {
		return
	}
	m.HandleFunc("GET /config", s.getConfig)
	m.HandleFunc("GET /config/versions", s.listVersions)
	m.HandleFunc("GET /config/versions/{n}", s.getVersion)
	m.HandleFunc("GET /config/versions/{n}/diff", s.getDiff)
	m.HandleFunc("POST /config/rollback", s.postRollback)
	m.HandleFunc("POST /config/reset", s.postReset)
	m.HandleFunc("POST /config/apply", s.postApply)
	for _, kind := range []string{confstore.Routes, confstore.Upstreams} {
		m.HandleFunc("GET /config/"+kind, s.listResources(kind))
		m.HandleFunc("POST /config/"+kind, s.writeResource(kind, opCreate))
		m.HandleFunc("GET /config/"+kind+"/{id}", s.getResource(kind))
		m.HandleFunc("PUT /config/"+kind+"/{id}", s.writeResource(kind, opPut))
		m.HandleFunc("PATCH /config/"+kind+"/{id}", s.writeResource(kind, opPatch))
		m.HandleFunc("DELETE /config/"+kind+"/{id}", s.writeResource(kind, opDelete))
	}
	// A route's rate limits, and an upstream's nodes, as resources of
	// their own: the list, replaced whole.
	for _, sub := range []struct{ kind, field string }{{confstore.Routes, "rate_limits"}, {confstore.Upstreams, "nodes"}} {
		path := "/config/" + sub.kind + "/{id}/" + sub.field
		m.HandleFunc("GET "+path, s.getField(sub.kind, sub.field))
		m.HandleFunc("PUT "+path, s.writeField(sub.kind, sub.field, false))
		m.HandleFunc("DELETE "+path, s.writeField(sub.kind, sub.field, true))
	}
}

// setVersion sets the headers naming version n: ETag, as If-Match takes it.
func setVersion(w http.ResponseWriter, n uint64) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(n, 10)))
}

func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request) {
	snap := s.control.read()
	tree, err := snap.cfg.Effective()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, 50001, err.Error())
		return
	}
	setVersion(w, snap.latest)
	writeJSON(w, http.StatusOK, map[string]any{"version": snap.latest, "config": tree})
}

// versionSummary is a version without its changes' values.
type versionSummary struct {
	Number  uint64 `json:"number"`
	Time    string `json:"time"`
	Source  string `json:"source"`
	Token   string `json:"token,omitempty"`
	Action  string `json:"action"`
	Changes string `json:"changes"`
}

func summarize(v *confstore.Version) versionSummary {
	return versionSummary{v.Number, v.Time, v.Source, v.Token, v.Action, v.Summary()}
}

func (s *Server) listVersions(w http.ResponseWriter, _ *http.Request) {
	snap := s.control.read()
	out := make([]versionSummary, 0, len(snap.versions))
	for i := len(snap.versions) - 1; i >= 0; i-- { // newest first
		out = append(out, summarize(&snap.versions[i]))
	}
	setVersion(w, snap.latest)
	writeJSON(w, http.StatusOK, map[string]any{"latest": snap.latest, "versions": out})
}

// version finds the version the path names, or answers 400 or 404.
func (s *Server) version(w http.ResponseWriter, r *http.Request) (*confstore.Version, bool) {
	snap := s.control.read()
	n, err := strconv.ParseUint(r.PathValue("n"), 10, 64)
	if err != nil {
		s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("version %q: want a number", r.PathValue("n")))
		return nil, false
	}
	for i := range snap.versions {
		if snap.versions[i].Number == n {
			return &snap.versions[i], true
		}
	}
	s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("version %d is not kept (the last %d are)", n, confstore.Keep))
	return nil, false
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	v, ok := s.version(w, r)
	if !ok {
		return
	}
	doc, err := s.control.at(v.Number)
	if err != nil {
		s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("version %d is not kept", v.Number))
		return
	}
	config.Redact(doc)
	writeJSON(w, http.StatusOK, map[string]any{"version": summarize(v), "config": doc})
}

func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) {
	v, ok := s.version(w, r)
	if !ok {
		return
	}
	list, err := v.ChangeList()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, 50001, err.Error())
		return
	}
	changes := make([]map[string]any, len(list))
	for i, c := range list {
		before, after := cloneAny(c.Before), cloneAny(c.After)
		config.Redact(map[string]any{"v": before}) // values keyed as in the config
		config.Redact(map[string]any{"v": after})
		changes[i] = map[string]any{"kind": c.Kind, "id": c.ID, "op": c.Op(), "before": before, "after": after}
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v.Number, "changes": changes})
}

func cloneAny(v any) any {
	if v == nil {
		return nil
	}
	return confstore.Clone(map[string]any{"v": v})["v"]
}

func (s *Server) postRollback(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Version *uint64 `json:"version"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	if body.Version == nil {
		s.fail(w, http.StatusBadRequest, 40001, `version: required, as {"version": N}`)
		return
	}
	wr, ok := s.writer(w, r, fmt.Sprintf("rollback to %d", *body.Version))
	if !ok {
		return
	}
	v, err := s.control.rollback(wr, *body.Version)
	s.answerWrite(w, v, err, http.StatusOK, nil)
}

func (s *Server) postReset(w http.ResponseWriter, r *http.Request) {
	wr, ok := s.writer(w, r, "reset to the config file")
	if !ok {
		return
	}
	v, err := s.control.reset(wr)
	s.answerWrite(w, v, err, http.StatusOK, nil)
}

// postApply creates or replaces every route and upstream the body lists,
// {"routes": [...], "upstreams": [...]}, as one version; with ?prune=1 it
// also deletes the resources of a listed kind that the body leaves out,
// so the body becomes the whole set (decK's sync).
func (s *Server) postApply(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if !s.decodeDoc(w, r, &body) {
		return
	}
	prune := false
	if v := r.URL.Query().Get("prune"); v != "" {
		var err error
		if prune, err = strconv.ParseBool(v); err != nil {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("prune=%s: want 1 or 0", v))
			return
		}
	}
	type res struct {
		id string
		v  any
	}
	lists := map[string][]res{}
	for k, v := range body {
		key := confstore.KeyField(k)
		if key == "" {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("%s: apply takes routes and upstreams only", k))
			return
		}
		items, ok := v.([]any)
		if !ok {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("%s: want a list", k))
			return
		}
		for i, it := range items {
			m, _ := it.(map[string]any)
			id, _ := m[key].(string)
			if id == "" {
				s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("%s[%d].%s: required, a string", k, i, key))
				return
			}
			lists[k] = append(lists[k], res{id, m})
		}
	}
	action := "POST /config/apply"
	if prune {
		action += "?prune=1"
	}
	wr, ok := s.writer(w, r, action)
	if !ok {
		return
	}
	v, err := s.control.change(wr, func(d confstore.Doc) error {
		for kind, items := range lists {
			keep := map[string]bool{}
			for _, it := range items {
				keep[it.id] = true
				confstore.Set(d, kind, it.id, it.v)
			}
			if !prune {
				continue
			}
			old, _ := d[kind].([]any)
			for _, it := range old {
				m, _ := it.(map[string]any)
				if id, _ := m[confstore.KeyField(kind)].(string); !keep[id] {
					confstore.Set(d, kind, id, nil)
				}
			}
		}
		return nil
	})
	s.answerWrite(w, v, err, http.StatusOK, nil)
}

func (s *Server) listResources(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		snap := s.control.read()
		list, _ := confstore.Clone(confstore.Doc{"v": snap.cur[kind]})["v"].([]any)
		if list == nil {
			list = []any{}
		}
		config.Redact(map[string]any{kind: list})
		setVersion(w, snap.latest)
		writeJSON(w, http.StatusOK, map[string]any{"version": snap.latest, kind: list})
	}
}

func (s *Server) getResource(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.control.read()
		v := confstore.Get(snap.cur, kind, r.PathValue("id"))
		if v == nil {
			s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("no %s %q", singular(kind), r.PathValue("id")))
			return
		}
		v = cloneAny(v)
		config.Redact(map[string]any{kind: []any{v}})
		setVersion(w, snap.latest)
		writeJSON(w, http.StatusOK, v)
	}
}

func singular(kind string) string { return strings.TrimSuffix(kind, "s") }

type writeOp int

const (
	opCreate writeOp = iota // POST /config/routes: a new resource, its key in the body
	opPut                   // replace, or create under the path's key
	opPatch                 // JSON merge patch (RFC 7386) of an existing resource
	opDelete
)

func (s *Server) writeResource(kind string, op writeOp) http.HandlerFunc {
	key := confstore.KeyField(kind)
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if op != opDelete && !s.decodeDoc(w, r, &body) {
			return
		}
		id := r.PathValue("id")
		if op == opCreate {
			id, _ = body[key].(string)
			if id == "" {
				s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("%s: required, a string", key))
				return
			}
		}
		if op == opPut || op == opCreate {
			switch got, has := body[key]; {
			case !has:
				body[key] = id
			case got != id:
				s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("%s: %v differs from the path's %q; a %s's %s cannot change", key, got, id, singular(kind), key))
				return
			}
		}
		wr, ok := s.writer(w, r, r.Method+" "+r.URL.Path)
		if !ok {
			return
		}
		created := false
		v, err := s.control.change(wr, func(d confstore.Doc) error {
			old := confstore.Get(d, kind, id)
			switch op {
			case opCreate:
				if old != nil {
					return &conflictError{fmt.Sprintf("%s %q exists; PUT /config/%s/%s replaces it", singular(kind), id, kind, id)}
				}
				created = true
				confstore.Set(d, kind, id, body)
			case opPut:
				created = old == nil
				confstore.Set(d, kind, id, body)
			case opPatch:
				if old == nil {
					return errNotFound
				}
				next := mergePatch(cloneAny(old), body)
				if m, _ := next.(map[string]any); m == nil || m[key] != id {
					return &fieldError{key, fmt.Sprintf("a %s's %s cannot change", singular(kind), key)}
				}
				confstore.Set(d, kind, id, next)
			case opDelete:
				if old == nil {
					return errNotFound
				}
				confstore.Set(d, kind, id, nil)
			}
			return nil
		})
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		s.answerWrite(w, v, err, status, func() any {
			snap := s.control.read()
			res := cloneAny(confstore.Get(snap.cur, kind, id))
			if res != nil {
				config.Redact(map[string]any{kind: []any{res}})
			}
			return res
		})
	}
}

func (s *Server) getField(kind, field string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.control.read()
		res, _ := confstore.Get(snap.cur, kind, r.PathValue("id")).(map[string]any)
		if res == nil {
			s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("no %s %q", singular(kind), r.PathValue("id")))
			return
		}
		list := cloneAny(res[field])
		if list == nil {
			list = []any{}
		}
		setVersion(w, snap.latest)
		writeJSON(w, http.StatusOK, map[string]any{field: list})
	}
}

// writeField replaces (or, with del, removes) one list field of a
// resource: a route's rate_limits, an upstream's nodes. The body is
// {"<field>": [...]}.
func (s *Server) writeField(kind, field string, del bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if !del {
			if !s.decodeDoc(w, r, &body) {
				return
			}
			if _, ok := body[field].([]any); !ok || len(body) != 1 {
				s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf(`%s: required, a list, as {"%s": [...]}, and nothing else`, field, field))
				return
			}
		}
		wr, ok := s.writer(w, r, r.Method+" "+r.URL.Path)
		if !ok {
			return
		}
		id := r.PathValue("id")
		v, err := s.control.change(wr, func(d confstore.Doc) error {
			old, _ := confstore.Get(d, kind, id).(map[string]any)
			if old == nil {
				return errNotFound
			}
			next := cloneAny(old).(map[string]any)
			if del {
				delete(next, field)
			} else {
				next[field] = body[field]
			}
			confstore.Set(d, kind, id, next)
			return nil
		})
		s.answerWrite(w, v, err, http.StatusOK, nil)
	}
}

// mergePatch applies an RFC 7386 JSON merge patch to target.
func mergePatch(target any, patch map[string]any) any {
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range patch {
		if v == nil {
			delete(t, k)
			continue
		}
		if p, ok := v.(map[string]any); ok {
			t[k] = mergePatch(t[k], p)
			continue
		}
		t[k] = v
	}
	return t
}

// conflictError is a create of a resource that exists.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// fieldError is a request that names a field wrongly.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// writer is who writes and what, with the If-Match version; it answers
// 400 for an If-Match that is not a version.
func (s *Server) writer(w http.ResponseWriter, r *http.Request, action string) (writer, bool) {
	wr := writer{token: tokenName(r), action: action}
	if v := r.Header.Get("If-Match"); v != "" && v != "*" {
		n, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
		if err != nil || n == 0 {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("If-Match %q: want a version number, as the ETag of a read gives it", v))
			return wr, false
		}
		wr.ifMatch = n
	}
	return wr, true
}

// answerWrite answers a write: status with the new version, what changed
// and the resource (when res gives one), or the error's status.
func (s *Server) answerWrite(w http.ResponseWriter, v confstore.Version, err error, status int, res func() any) {
	var stale *staleError
	var invalid *invalidError
	var conflict *conflictError
	var field *fieldError
	var unavailable *unavailableError
	switch {
	case err == nil:
		setVersion(w, v.Number)
		out := map[string]any{"version": v.Number, "changes": Summary(v.Changes)}
		if res != nil {
			if r := res(); r != nil {
				out["resource"] = r
			}
		}
		writeJSON(w, status, out)
	case errors.As(err, &stale):
		s.fail(w, http.StatusConflict, 40902, err.Error())
	case errors.As(err, &conflict):
		s.fail(w, http.StatusConflict, 40903, err.Error())
	case errors.As(err, &field):
		s.fail(w, http.StatusBadRequest, 40001, err.Error())
	case errors.As(err, &invalid):
		s.failInvalid(w, invalid.err)
	case errors.Is(err, errNotFound):
		s.fail(w, http.StatusNotFound, 40402, "no such resource")
	case errors.Is(err, confstore.ErrNotKept):
		s.fail(w, http.StatusNotFound, 40402, fmt.Sprintf("that version is not kept (the last %d are)", confstore.Keep))
	case errors.Is(err, errNoState), errors.As(err, &unavailable):
		s.fail(w, http.StatusServiceUnavailable, 50301, err.Error())
	default:
		s.fail(w, http.StatusInternalServerError, 50001, err.Error())
	}
}

// failInvalid answers 422, code 42201, with each of the config's problems
// in errors: the field path of each, as the config file's errors name it.
// The line numbers are dropped: they count lines of the document the
// API's change made, which no one wrote.
func (s *Server) failInvalid(w http.ResponseWriter, err error) {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimPrefix(l, "config: ")
		if rest, ok := strings.CutPrefix(l, "line "); ok {
			if _, after, ok := strings.Cut(rest, ": "); ok {
				l = after
			}
		}
		if i := strings.LastIndex(l, " (line "); i > 0 && strings.HasSuffix(l, ")") {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	id := "admin-" + strconv.FormatUint(s.ids.Add(1), 10)
	w.Header().Set("X-Request-Id", id)
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"code": 42201,
		"message": "the config refuses this change: " + strings.Join(lines, "; "), "errors": lines, "request_id": id})
}

// decode reads r's JSON body into v, answering 400 when it does not
// decode.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	data, ok := s.body(w, r)
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.fail(w, http.StatusBadRequest, 40001, "body: "+err.Error())
		return false
	}
	return true
}

// decodeDoc reads r's body, a JSON object, into v as the config file's
// documents decode (confstore.Parse): integers stay integers.
func (s *Server) decodeDoc(w http.ResponseWriter, r *http.Request, v *map[string]any) bool {
	data, ok := s.body(w, r)
	if !ok {
		return false
	}
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		s.fail(w, http.StatusBadRequest, 40001, "body: not JSON: "+err.Error())
		return false
	}
	if _, ok := probe.(map[string]any); !ok {
		s.fail(w, http.StatusBadRequest, 40001, "body: want a JSON object")
		return false
	}
	d, err := confstore.Parse(data)
	if err != nil {
		s.fail(w, http.StatusBadRequest, 40001, "body: "+err.Error())
		return false
	}
	*v = d
	return true
}

func (s *Server) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		s.fail(w, http.StatusBadRequest, 40001, "body: "+err.Error())
		return nil, false
	case len(data) > maxBody:
		s.fail(w, http.StatusRequestEntityTooLarge, 41301, fmt.Sprintf("body over %d bytes", maxBody))
		return nil, false
	}
	return data, true
}
