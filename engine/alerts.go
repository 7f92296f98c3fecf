// Alerts: the server's alert dispatcher (engine/alert), made from the
// config's alerts section at New, started by Run and changed by a reload.

package engine

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/loopgate/loopgate/engine/alert"
	"github.com/loopgate/loopgate/engine/config"
	kinds "github.com/loopgate/loopgate/pool/alert"
)

// alertOptions is the dispatcher's view of a config's alerts section.
func alertOptions(a *config.Alerts) alert.Options {
	o := alert.Options{IsolationThreshold: a.IsolationThreshold, Webhooks: make([]alert.Webhook, len(a.Webhooks))}
	for i, w := range a.Webhooks {
		ev := make([]kinds.Kind, len(w.Events))
		for j, e := range w.Events {
			ev[j] = kinds.Kind(e)
		}
		o.Webhooks[i] = alert.Webhook{URL: w.URL, Events: ev, Timeout: time.Duration(w.Timeout),
			Retries: w.Retries, Backoff: time.Duration(w.Backoff)}
	}
	return o
}

// certExpiryWindow is how long before its end a certificate is alerted;
// certCheckEvery how often the certificates are looked at (and after every
// reload).
const (
	certExpiryWindow = 14 * 24 * time.Hour
	certCheckEvery   = time.Hour
)

// checkCertificates raises certificate_expiring for every certificate of
// the running config that ends within certExpiryWindow of now, and its
// resolution for the others (the dispatcher keeps one alert per episode
// and ignores a resolution with none open): the listeners' certificates
// and the upstreams' client certificates as this version loaded them, and
// the CA files (upstreams[].tls.ca, listeners[].tls.client_auth.ca) as
// they are on disk now, by their earliest-ending certificate: a CA pool
// keeps no dates. Off the loops; a CA file is a few kilobytes read once an
// hour.
func (s *Server) checkCertificates(now time.Time) {
	st := s.state.Load()
	expiry := func(what, file string, notAfter time.Time) {
		left := notAfter.Sub(now)
		kinds.Raise(kinds.Event{Kind: kinds.CertExpiring, Subject: file, Resolved: left >= certExpiryWindow,
			Message: fmt.Sprintf("%s %s expires on %s (in %s)", what, file, notAfter.UTC().Format(time.RFC3339), left.Round(time.Minute))})
	}
	for _, ts := range st.snap.tls {
		if ts != nil && ts.Certs != nil {
			ts.Certs.Expiry(func(file string, notAfter time.Time) { expiry("certificate", file, notAfter) })
		}
	}
	cas := map[string]bool{}
	for i := range st.cfg.Upstreams {
		t := st.cfg.Upstreams[i].TLS
		if t == nil {
			continue
		}
		if t.CA != "" {
			cas[t.CA] = true
		}
		// snapshot.upstreams is in config order; the client config holds
		// the certificate this version loaded, its leaf parsed.
		if i >= len(st.snap.upstreams) || t.ClientCert == "" {
			continue
		}
		if tc := st.snap.upstreams[i].group.Pool.TLS; tc != nil && len(tc.Certificates) > 0 && tc.Certificates[0].Leaf != nil {
			expiry("upstream client certificate", t.ClientCert, tc.Certificates[0].Leaf.NotAfter)
		}
	}
	for _, l := range st.cfg.ClientListeners() {
		if l.TLS != nil && l.TLS.ClientAuth != nil && l.TLS.ClientAuth.CA != "" {
			cas[l.TLS.ClientAuth.CA] = true
		}
	}
	for _, file := range slices.Sorted(maps.Keys(cas)) {
		if notAfter, ok := earliestEnd(file); ok {
			expiry("CA certificate in", file, notAfter)
		}
	}
}

// earliestEnd is the earliest NotAfter of the certificates in a PEM file;
// false when it cannot be read or holds none (the reload that loads it
// says why).
func earliestEnd(file string) (time.Time, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return time.Time{}, false
	}
	var first time.Time
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && (first.IsZero() || c.NotAfter.Before(first)) {
			first = c.NotAfter
		}
	}
	return first, !first.IsZero()
}

// watchCertificates checks the certificates now and every certCheckEvery
// until stop is closed.
func (s *Server) watchCertificates(stop <-chan struct{}) {
	t := time.NewTicker(certCheckEvery)
	defer t.Stop()
	for {
		s.checkCertificates(time.Now())
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// RaiseReloadRefused reports a reload that was refused (err) or, with err
// nil, applied: the end of a refused episode. The command calls it for
// every reload it reports, a config file that does not load included.
func RaiseReloadRefused(err error) {
	e := kinds.Event{Kind: kinds.ReloadRefused, Subject: "config", Resolved: err == nil, Message: "reload applied"}
	if err != nil {
		e.Message = err.Error()
	}
	kinds.Raise(e)
}
