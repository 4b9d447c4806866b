//! Thin Linux packet I/O.
#![allow(unsafe_code)]
