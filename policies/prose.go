package policies

import (
	"encoding/json"
	"strings"
	"sync"
)

// prose is the capability data's "prose" section: the lists of backends and
// capabilities that texts name as ${NAME} or ${NAME|or}, rendered from the
// rest of the data by `go generate` (internal/prose), so that the Rego rules
// read them too.
var prose = sync.OnceValue(func() *strings.Replacer {
	b, err := Bundle.ReadFile(CapabilitiesPath)
	if err != nil {
		panic(err) // embedded at build time
	}
	var d struct {
		Prose map[string]string `json:"prose"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		panic("capabilities decode: " + err.Error())
	}
	pairs := make([]string, 0, 2*len(d.Prose))
	for name, text := range d.Prose {
		pairs = append(pairs, "${"+name+"}", text)
	}
	return strings.NewReplacer(pairs...)
})

// Expand fills the ${NAME} placeholders of a rule's or a schema's text with
// the lists the capability data renders; an unknown one stays as it is.
func Expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return prose().Replace(s)
}
