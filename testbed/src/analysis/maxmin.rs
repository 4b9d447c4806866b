//! Weighted max-min fair shares by progressive filling.
//!
//! Source: Bertsekas & Gallager, *Data Networks*, 2nd ed., §6.5.2 (max-min fairness and the
//! progressive filling algorithm); weighted form as used by the FQCN paper (Zhang & Ansari,
//! weighted flow fairness) and QCN-REFERENCE §6.
//!
//! Every unfrozen flow `i` has rate `r_i = w_i·λ` for a common water level `λ` that rises from
//! 0. Link `l` of capacity `C_l` saturates at `λ_l = (C_l − F_l) / Σ_{i unfrozen on l} w_i`, where
//! `F_l` is the rate already frozen on `l`; flow `i` reaches its demand `d_i` at `λ = d_i / w_i`.
//! The smallest of these levels is taken, the flows it concerns are frozen (all flows of the
//! saturated links, or the flow at its demand), and the filling goes on until every flow is
//! frozen. The result is the unique allocation where no flow can grow without a flow of smaller
//! or equal normalized rate `r/w` shrinking.

use std::fmt;

/// A flow for [`max_min`].
#[derive(Debug, Clone, PartialEq)]
pub struct MmFlow {
    /// Indices into the link array of the links the flow crosses.
    pub links: Vec<usize>,
    /// Weight (> 0).
    pub weight: f64,
    /// Demand cap (bit/s), `None` = greedy.
    pub demand: Option<f64>,
}

/// Why the shares could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum MaxMinError {
    /// Flow `i` crosses no link and has no demand: its share is unbounded.
    Unbounded(usize),
    /// Flow `i` names link index `l` that does not exist.
    NoSuchLink(usize, usize),
    /// Flow `i` has a weight that is not a positive number.
    BadWeight(usize),
}

impl fmt::Display for MaxMinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unbounded(i) => write!(f, "flow #{i} crosses no link and has no demand cap"),
            Self::NoSuchLink(i, l) => {
                write!(f, "flow #{i} crosses link #{l}, which does not exist")
            }
            Self::BadWeight(i) => write!(f, "flow #{i} has a weight that is not positive"),
        }
    }
}

impl std::error::Error for MaxMinError {}

/// Weighted max-min fair shares of `flows` over links of capacities `capacities` (bit/s).
/// Negative capacities count as 0.
pub fn max_min(capacities: &[f64], flows: &[MmFlow]) -> Result<Vec<f64>, MaxMinError> {
    for (i, f) in flows.iter().enumerate() {
        if !(f.weight > 0.0 && f.weight.is_finite()) {
            return Err(MaxMinError::BadWeight(i));
        }
        if let Some(&l) = f.links.iter().find(|&&l| l >= capacities.len()) {
            return Err(MaxMinError::NoSuchLink(i, l));
        }
        if f.links.is_empty() && f.demand.is_none() {
            return Err(MaxMinError::Unbounded(i));
        }
    }
    let n = flows.len();
    let mut rate = vec![0.0f64; n];
    let mut frozen = vec![false; n];
    let mut frozen_load = vec![0.0f64; capacities.len()];
    // Each round freezes at least one flow.
    for _ in 0..=n {
        if frozen.iter().all(|&f| f) {
            break;
        }
        let mut weight_on = vec![0.0f64; capacities.len()];
        for (i, f) in flows.iter().enumerate() {
            if !frozen[i] {
                for &l in &f.links {
                    weight_on[l] += f.weight;
                }
            }
        }
        let mut level = f64::INFINITY;
        for (l, &w) in weight_on.iter().enumerate() {
            if w > 0.0 {
                level = level.min((capacities[l].max(0.0) - frozen_load[l]).max(0.0) / w);
            }
        }
        for (i, f) in flows.iter().enumerate() {
            if let (false, Some(d)) = (frozen[i], f.demand) {
                level = level.min(d.max(0.0) / f.weight);
            }
        }
        let tol = 1e-12 * level.abs().max(1.0);
        let saturated: Vec<bool> = weight_on
            .iter()
            .enumerate()
            .map(|(l, &w)| {
                w > 0.0 && (capacities[l].max(0.0) - frozen_load[l]).max(0.0) / w <= level + tol
            })
            .collect();
        let mut froze_any = false;
        for (i, f) in flows.iter().enumerate() {
            if frozen[i] {
                continue;
            }
            let at_demand = f
                .demand
                .is_some_and(|d| d.max(0.0) / f.weight <= level + tol);
            if at_demand || f.links.iter().any(|&l| saturated[l]) {
                let r = match (at_demand, f.demand) {
                    (true, Some(d)) => d.max(0.0).min(f.weight * level),
                    _ => f.weight * level,
                };
                rate[i] = r;
                frozen[i] = true;
                froze_any = true;
                for &l in &f.links {
                    frozen_load[l] += r;
                }
            }
        }
        if !froze_any {
            break;
        }
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_link_equal() {
        let f = |d| MmFlow {
            links: vec![0],
            weight: 1.0,
            demand: d,
        };
        let r = max_min(&[10.0], &[f(None), f(None), f(Some(1.0))]).unwrap();
        assert_eq!(r, vec![4.5, 4.5, 1.0]);
    }

    #[test]
    fn errors() {
        assert_eq!(
            max_min(
                &[1.0],
                &[MmFlow {
                    links: vec![],
                    weight: 1.0,
                    demand: None
                }]
            ),
            Err(MaxMinError::Unbounded(0))
        );
        assert_eq!(
            max_min(
                &[1.0],
                &[MmFlow {
                    links: vec![3],
                    weight: 1.0,
                    demand: None
                }]
            ),
            Err(MaxMinError::NoSuchLink(0, 3))
        );
        assert_eq!(
            max_min(
                &[1.0],
                &[MmFlow {
                    links: vec![0],
                    weight: 0.0,
                    demand: None
                }]
            ),
            Err(MaxMinError::BadWeight(0))
        );
    }
}
