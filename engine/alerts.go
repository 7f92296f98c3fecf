// Alerts: the server's alert dispatcher (engine/alert), made from the
// config's alerts section at New, started by Run and changed by a reload.

package engine

import (
	"fmt"
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

// certExpiryWindow is how long before its end a listener certificate is
// alerted; certCheckEvery how often the certificates are looked at (and
// after every reload).
const (
	certExpiryWindow = 14 * 24 * time.Hour
	certCheckEvery   = time.Hour
)

// checkCertificates raises certificate_expiring for every listener
// certificate of the running config that ends within certExpiryWindow of
// now, and its resolution for the others (the dispatcher keeps one alert
// per episode and ignores a resolution with none open). Off the loops.
func (s *Server) checkCertificates(now time.Time) {
	for _, ts := range s.state.Load().snap.tls {
		if ts == nil || ts.Certs == nil {
			continue
		}
		ts.Certs.Expiry(func(file string, notAfter time.Time) {
			left := notAfter.Sub(now)
			kinds.Raise(kinds.Event{Kind: kinds.CertExpiring, Subject: file, Resolved: left >= certExpiryWindow,
				Message: fmt.Sprintf("certificate %s expires on %s (in %s)", file, notAfter.UTC().Format(time.RFC3339), left.Round(time.Minute))})
		})
	}
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
