package weir

import (
	"fmt"
	"slices"
	"strings"
)

// validateBudgets checks the catalog's budgets: each valid, with the ID
// ConfigBudgetID gives it, of a group, model or platform model the
// catalog defines (a key's is not checked: keys are the store's), and
// one per subject and window length.
func (c *Catalog) validateBudgets() *FieldError {
	seen := map[string]int{}
	for i, b := range c.Budgets {
		path := fmt.Sprintf("budgets[%d]", i)
		if err := b.validate(); err != nil {
			return err.within(path)
		}
		if err := c.checkBudgetSubject(b.Subject); err != nil {
			return err.within(path)
		}
		if b.ID != ConfigBudgetID(b.Subject, b.Window) {
			return invalidf(path+".id", "%q: a config budget's ID is %q", b.ID, ConfigBudgetID(b.Subject, b.Window))
		}
		if j, ok := seen[b.ID]; ok {
			return invalidf(path+".window", "%s has a %s budget already (budgets[%d]): one per subject and window", b.Subject, b.Window, j)
		}
		seen[b.ID] = i
	}
	return nil
}

// CheckBudgetSubject checks that a budget's subject is one the catalog
// defines: a group, a public model or a platform model. A key's is not
// checked here, as keys are in the store. The error is a *FieldError on
// "subject" that says what there is.
func (c *Catalog) CheckBudgetSubject(s BudgetSubject) error {
	if err := c.checkBudgetSubject(s); err != nil {
		return err
	}
	return nil
}

func (c *Catalog) checkBudgetSubject(s BudgetSubject) *FieldError {
	if err := s.validate(); err != nil {
		return err
	}
	var names []string
	switch s.Type {
	case "group":
		for _, g := range c.Groups {
			names = append(names, g.Name)
		}
	case "model":
		for _, m := range c.Models {
			names = append(names, m.Name)
		}
	case "platform_model":
		for _, pm := range c.PlatformModels {
			names = append(names, pm.Name)
		}
	default:
		return nil
	}
	if slices.Contains(names, s.Name) {
		return nil
	}
	slices.Sort(names)
	return invalidf("subject", "no %s %q in the catalog (%ss: %s)", s.Type, s.Name, s.Type, strings.Join(names, ", "))
}
