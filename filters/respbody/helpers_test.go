package respbody

import "github.com/loopgate/loopgate/filters"

// checkInto returns a Check that collects each problem in errs.
func checkInto(errs *[]string) *filters.Check {
	return &filters.Check{Report: func(path, reason string) { *errs = append(*errs, path+": "+reason) }}
}
