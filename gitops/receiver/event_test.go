package receiver

import (
	"net/url"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		h    []string
		want kind
	}{
		{[]string{GitHubEventHeader, "push"}, push},
		{[]string{GitHubEventHeader, "ping"}, ping},
		{[]string{GitHubEventHeader, "pull_request"}, ignore},
		{[]string{GitLabEventHeader, "Push Hook"}, push},
		{[]string{GitLabEventHeader, "Tag Push Hook"}, push},
		{[]string{GitLabEventHeader, "Merge Request Hook"}, ignore},
		{[]string{"X-Anything", "x"}, push},
	}
	for _, tt := range tests {
		h := header(tt.h...)
		if got, _ := classify(detect(h), h); got != tt.want {
			t.Errorf("%v: got %d, want %d", tt.h, got, tt.want)
		}
	}
}

func TestPushRef(t *testing.T) {
	form := "payload=" + url.QueryEscape(`{"ref":"refs/heads/dev","after":"abc"}`)
	tests := []struct {
		name, ct, body, want string
		err                  bool
	}{
		{"JSON", "application/json", `{"ref":"refs/heads/main","commits":[{"id":"x"}]}`, "refs/heads/main", false},
		{"JSON without ref", "application/json", `{"after":"abc"}`, "", false},
		{"JSON non-string ref", "application/json", `{"ref":42}`, "", false},
		{"GitHub form", "application/x-www-form-urlencoded", form, "refs/heads/dev", false},
		{"GitHub form with charset", "application/x-www-form-urlencoded; charset=utf-8", form, "refs/heads/dev", false},
		{"not JSON", "text/plain", "hello", "", true},
		{"JSON array", "application/json", `["ref"]`, "", true},
		{"empty", "", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pushRef(tt.ct, []byte(tt.body))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestWants(t *testing.T) {
	branch := &v1alpha1.GitRef{Branch: "main"}
	tag := &v1alpha1.GitRef{Tag: "v1.0.0"}
	semver := &v1alpha1.GitRef{SemVer: "^1"}
	commit := &v1alpha1.GitRef{Commit: "0123456789012345678901234567890123456789"}
	tests := []struct {
		name string
		ref  *v1alpha1.GitRef
		push string
		want bool
	}{
		{"branch: same branch", branch, "refs/heads/main", true},
		{"branch: other branch", branch, "refs/heads/other", false},
		{"branch: branch with the name as prefix", branch, "refs/heads/main-2", false},
		{"branch: tag", branch, "refs/tags/v1.0.0", false},
		{"branch: no ref in payload", branch, "", true},
		{"tag: a tag", tag, "refs/tags/v2.0.0", true},
		{"tag: a branch", tag, "refs/heads/main", false},
		{"semver: a tag", semver, "refs/tags/v1.2.3", true},
		{"semver: a branch", semver, "refs/heads/main", false},
		{"commit: anything", commit, "refs/heads/x", true},
		{"default branch: anything", nil, "refs/heads/x", true},
		{"empty ref struct: anything", &v1alpha1.GitRef{}, "refs/tags/x", true},
	}
	for _, tt := range tests {
		if got := wants(tt.ref, tt.push); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
