// The token ids a request may name (a completions prompt of ids, logit_bias): the served model family's.

/** Qwen2.5's embedding rows: the largest id a completions prompt may send is one less. */
export const VOCAB_SIZE = 151_936;
