package generate

import "github.com/acaptcha/acaptcha/skill/pool"

// Producer is what a challenge pool draws from (pool.Producer); Generator
// and Hybrid implement it.
type Producer = pool.Producer

var (
	_ Producer         = (*Generator)(nil)
	_ pool.Accountant  = (*Generator)(nil)
	_ pool.Accountant  = (*Hybrid)(nil)
	_ pool.BudgetSpent = (*BudgetError)(nil)
	_ pool.Rejection   = (*RejectError)(nil)
)
