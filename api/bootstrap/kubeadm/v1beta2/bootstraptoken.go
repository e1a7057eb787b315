package v1beta2

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// bootstrapTokenPattern is the shape of a kubeadm bootstrap token: a six
// character token ID, a dot, and a sixteen character token secret.
const bootstrapTokenPattern = `^([a-z0-9]{6})\.([a-z0-9]{16})$`

var bootstrapTokenRE = regexp.MustCompile(bootstrapTokenPattern)

// BootstrapTokenString is a kubeadm bootstrap token such as
// "abcdef.0123456789abcdef". A joining node uses it to trust the API server
// and to authenticate while it bootstraps. It is written as a single string.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=23
// +kubebuilder:validation:Pattern=`^[a-z0-9]{6}\.[a-z0-9]{16}$`
type BootstrapTokenString struct {
	// ID is the public part, before the dot.
	ID string `json:"-"`
	// Secret is the private part, after the dot.
	Secret string `json:"-"`
}

// NewBootstrapTokenString parses a token of the form "[a-z0-9]{6}.[a-z0-9]{16}".
func NewBootstrapTokenString(token string) (*BootstrapTokenString, error) {
	m := bootstrapTokenRE.FindStringSubmatch(token)
	if m == nil {
		return nil, fmt.Errorf("bootstrap token %q does not have the form [a-z0-9]{6}.[a-z0-9]{16}", token)
	}
	return &BootstrapTokenString{ID: m[1], Secret: m[2]}, nil
}

// String gives the token as "id.secret", or "" when either part is missing.
func (t BootstrapTokenString) String() string {
	if t.ID == "" || t.Secret == "" {
		return ""
	}
	return t.ID + "." + t.Secret
}

// MarshalJSON writes the token as one JSON string.
func (t BootstrapTokenString) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.String())
}

// UnmarshalJSON reads the token from one JSON string; null and "" give the
// empty token.
func (t *BootstrapTokenString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("bootstrap token must be a string: %w", err)
	}
	if s == "" {
		*t = BootstrapTokenString{}
		return nil
	}
	parsed, err := NewBootstrapTokenString(s)
	if err != nil {
		return err
	}
	*t = *parsed
	return nil
}
