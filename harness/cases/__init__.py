"""What gets judged: a case is one kernel, mode, shape set, size instance, input variant and seed, and its name
says so. In: kernel contracts (emitters), shape sets and modes (reference), a base seed. Out: `Case`s that
rebuild from their names (`names`), their seeded realistic inputs (`inputs`), the value-range variants real
models reach (`variants`), the inputs a reference decode of a checkpoint feeds each kernel (`model_inputs`,
`--inputs-from`), and the planted bugs that must make their cases fail (`planted`, the negative controls)."""
