//go:build tools

// Pins sigs.k8s.io/karpenter/kwok in go.mod (go mod tidy keeps what this imports).
package tools

import _ "sigs.k8s.io/karpenter/kwok"
