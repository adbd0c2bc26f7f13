package weir

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Money is an amount of the operator's currency (Weir names none: a
// price table in dollars makes every cost and budget dollars) in
// billionths of its unit, so that a token's price, a fraction of a cent,
// is whole and no sum of money is ever a float. An int64 of billionths
// holds about 9.2 billion units.
type Money int64

// MoneyScale is how many Money make one unit of the currency.
const MoneyScale Money = 1_000_000_000

// moneyDigits is how many decimal places a Money has.
const moneyDigits = 9

// ParseMoney reads a decimal amount ("12.50", "0.15", "3") as Money:
// digits with at most nine after the point, no sign, no exponent, as a
// price table or a budget writes it. Reading never goes through a float.
func ParseMoney(s string) (Money, error) {
	whole, frac, dotted := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" && frac == "" || dotted && frac == "" || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("%w: money %q: want a decimal amount such as 12.50", ErrInvalid, s)
	}
	if len(frac) > moneyDigits {
		return 0, fmt.Errorf("%w: money %q: at most %d decimal places", ErrInvalid, s, moneyDigits)
	}
	var w int64
	if whole != "" {
		var err error
		if w, err = strconv.ParseInt(whole, 10, 64); err != nil || w > math.MaxInt64/int64(MoneyScale) {
			return 0, fmt.Errorf("%w: money %q is too large", ErrInvalid, s)
		}
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", moneyDigits-len(frac)), 10, 64)
	}
	return Money(w)*MoneyScale + Money(f), nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// String writes m as a decimal with at least two places and no trailing
// zeros past them: "12.50", "0.00015", "-3.00".
func (m Money) String() string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-(m+1))+1 // MinInt64 has no positive int64
	}
	whole, frac := u/uint64(MoneyScale), u%uint64(MoneyScale)
	f := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	for len(f) < 2 {
		f += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, whole, f)
}

// MarshalJSON writes m as a decimal string ("12.50"): a JSON number
// would be read back as a float by most clients.
func (m Money) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON reads a decimal string or a plain JSON number written
// in decimal ("12.5" or 12.5), never through a float.
func (m *Money) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := ParseMoney(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalYAML reads a scalar written as a decimal (0.15 or "0.15").
func (m *Money) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: money: want a decimal amount such as 12.50", ErrInvalid)
	}
	v, err := ParseMoney(n.Value)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MulDiv is m*n/d rounded up, for d > 0 and m, n >= 0, saturating at
// the largest Money: a cost is never rounded down to less than was
// spent, and a count too large to price is priced at more than any
// budget.
func (m Money) MulDiv(n, d int64) Money {
	if m <= 0 || n <= 0 || d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(m), uint64(n))
	if hi >= uint64(d) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(d))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return Money(q)
}

// Add is m+o saturating at the largest Money, for m, o >= 0.
func (m Money) Add(o Money) Money {
	if o > 0 && m > math.MaxInt64-o {
		return math.MaxInt64
	}
	return m + o
}
