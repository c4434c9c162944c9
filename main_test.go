package main

import (
	"maps"
	"slices"
	"testing"
)

func TestQuietUnlessLogging(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    map[string]string
	}{
		{"nothing asked for logs", []string{"HOME=/root", "TF_IN_AUTOMATION=1"}, map[string]string{
			"TF_LOG_SDK": "OFF", "TF_LOG_SDK_PROTO": "OFF", "TF_LOG_SDK_FRAMEWORK": "OFF", "TF_LOG_PROVIDER": "OFF"}},
		{"TF_LOG", []string{"TF_LOG=DEBUG"}, map[string]string{}},
		{"TF_LOG_PROVIDER", []string{"TF_LOG_PROVIDER=TRACE"}, map[string]string{}},
		{"a provider's own level", []string{"TF_LOG_PROVIDER_SANDBOXIO=INFO"}, map[string]string{}},
		{"an SDK level", []string{"TF_LOG_SDK_FRAMEWORK=TRACE"}, map[string]string{}},
		{"TF_LOG_PATH alone", []string{"TF_LOG_PATH=/tmp/tf.log"}, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			quietUnlessLogging(c.environ, func(k, v string) error { got[k] = v; return nil })
			if !maps.Equal(got, c.want) {
				t.Errorf("set %v, want %v", got, c.want)
			}
			if len(got) > 0 && !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(sdkLogLevels))) {
				t.Errorf("set %v, want every one of %v", got, sdkLogLevels)
			}
		})
	}
}
