// Alerts: the server's alert dispatcher (engine/alert), made from the
// config's alerts section at New, started by Run and changed by a reload.

package engine

import (
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
