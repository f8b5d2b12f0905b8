//! BERT encoders.
