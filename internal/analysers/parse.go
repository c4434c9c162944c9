package analysers

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// maxFindings bounds the findings kept from one report: the decision needs
// the IDs, and a report of thousands says no more than its first ones.
const maxFindings = 200

// banditID is a bandit test ID; anything else in a report is not from the
// tool as we know it.
var banditID = regexp.MustCompile(`^B[0-9]{3}$`)

// ParseBandit reads bandit's JSON report (-f json). A report listing an
// error (bandit could not parse the code as Python) is an error: its
// findings would be incomplete.
func ParseBandit(data []byte) ([]Finding, error) {
	var rep struct {
		Errors []struct {
			Reason string `json:"reason"`
		} `json:"errors"`
		Results *[]struct {
			TestID     string `json:"test_id"`
			Severity   string `json:"issue_severity"`
			Confidence string `json:"issue_confidence"`
			Line       int    `json:"line_number"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("bandit's report is not JSON: %w", err)
	}
	if len(rep.Errors) > 0 {
		return nil, fmt.Errorf("bandit could not analyse the code (%s)", safeReason(rep.Errors[0].Reason))
	}
	if rep.Results == nil {
		return nil, errors.New("bandit's report has no results list")
	}
	out := []Finding{}
	for _, r := range *rep.Results {
		if !banditID.MatchString(r.TestID) {
			return nil, errors.New("bandit's report names a test that is not a bandit test ID")
		}
		if len(out) == maxFindings {
			break
		}
		out = append(out, Finding{ID: "bandit:" + r.TestID, Severity: level(r.Severity), Confidence: level(r.Confidence), Line: max(r.Line, 0)})
	}
	return out, nil
}

// ParseShellCheck reads shellcheck's JSON report (-f json1). A parse error
// of the script is itself a finding (SC1xxx, level error): shellcheck
// reports what it could not parse, and stops checking past it.
func ParseShellCheck(data []byte) ([]Finding, error) {
	var rep struct {
		Comments *[]struct {
			Code  int    `json:"code"`
			Level string `json:"level"`
			Line  int    `json:"line"`
		} `json:"comments"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("shellcheck's report is not JSON: %w", err)
	}
	if rep.Comments == nil {
		return nil, errors.New("shellcheck's report has no comments list")
	}
	out := []Finding{}
	for _, c := range *rep.Comments {
		if c.Code < 1000 || c.Code > 9999 {
			return nil, errors.New("shellcheck's report names a code that is not a shellcheck code")
		}
		if len(out) == maxFindings {
			break
		}
		out = append(out, Finding{ID: fmt.Sprintf("shellcheck:SC%d", c.Code), Severity: level(c.Level), Line: max(c.Line, 0)})
	}
	return out, nil
}

// level normalises a severity, confidence or level: lower case, and only
// the words the tools use (anything else is "unknown", so that a report
// cannot put arbitrary text into the input document or the audit record).
func level(s string) string {
	switch l := strings.ToLower(s); l {
	case "low", "medium", "high", "undefined", "style", "info", "warning", "error":
		return l
	}
	return "unknown"
}

// safeReason keeps bandit's own reason (it names the failure, e.g. "syntax
// error while parsing AST from file"), but never more than a short line of
// letters: it goes into the input document and the audit record.
func safeReason(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 80 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == ' ' {
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}
