"""Math layer: Householder reflectors, the SVD map and its inverse, singular-value maps (torch only)."""

from spectral_analysis.linalg.givens import (
    apply_packed_rotation,
    givens_apply,
    givens_apply_transpose,
    givens_matrix,
    packed_pairs,
    rotation_count,
)
from spectral_analysis.linalg.householder import (
    hgrad,
    hprod,
    normalize_reflectors,
    pack_reflectors,
    packed_reflector_product_sequential,
    reflector,
    trapezoid_mask,
    unpack_reflectors,
)
from spectral_analysis.linalg.kronecker import check_factors, kron_matrix, kron_matvec
from spectral_analysis.linalg.real_form import complex_vector, real_matrix, real_vector
from spectral_analysis.linalg.reflector_factor import complete_orthogonal, orthogonal_to_reflectors
from spectral_analysis.linalg.reflector_loop import reflector_loop
from spectral_analysis.linalg.sigma_maps import SigmaMap
from spectral_analysis.linalg.svd_image import (
    ImageMembership,
    MembershipUndecidedError,
    svd_decompose,
    svd_image_membership,
)
from spectral_analysis.linalg.svd_map import svd_compose, svd_compose_packed, svd_compose_reference
from spectral_analysis.linalg.wy import apply_householder, packed_reflector_product, reflector_product
from spectral_analysis.vocabulary import SIGMA_MAP_KINDS

__all__ = [
    "ImageMembership", "MembershipUndecidedError", "SIGMA_MAP_KINDS", "SigmaMap", "apply_householder",
    "apply_packed_rotation", "check_factors", "complete_orthogonal", "complex_vector", "givens_apply",
    "givens_apply_transpose", "givens_matrix", "hgrad", "packed_reflector_product",
    "packed_reflector_product_sequential", "hprod", "kron_matrix", "kron_matvec", "normalize_reflectors",
    "orthogonal_to_reflectors", "pack_reflectors", "packed_pairs", "real_matrix", "real_vector",
    "reflector", "reflector_loop", "reflector_product", "rotation_count", "svd_compose",
    "svd_compose_packed", "svd_compose_reference", "svd_decompose", "svd_image_membership",
    "trapezoid_mask", "unpack_reflectors",
]
