package providers

import "fmt"

// problems collects what is wrong with one provider's configuration, so that New can name
// every problem at once.
type problems []string

func (ps *problems) add(format string, a ...any) { *ps = append(*ps, fmt.Sprintf(format, a...)) }
