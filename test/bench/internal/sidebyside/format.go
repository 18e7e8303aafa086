package sidebyside

import (
	"fmt"
	"math"
)

// Fig formats a figure of a table with a precision to suit its magnitude:
// no decimals from 100 up, one from 10, three below; "–" for NaN.
func Fig(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// RatioFig formats a ratio of a table: two decimals; "–" for NaN.
func RatioFig(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
